"""The Jev protocol over HTTP: request limits, routing, answer shaping, and the FastAPI app."""
