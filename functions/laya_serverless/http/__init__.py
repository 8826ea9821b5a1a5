"""The Jev protocol over HTTP: the FastAPI app, its routes, bodies, admission and statuses (transport only)."""
