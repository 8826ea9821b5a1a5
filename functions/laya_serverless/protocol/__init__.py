"""The Jev protocol below its transports: request rules, decisions, routing, detection, tournament, strict projection,
planning, and the deployment with its loader. No FastAPI here; `http/` and `jobs/` both build on it."""
