"""The dashboard (issue 35): an ASGI app on Starlette and Jinja2, served by uvicorn in the daemon's loop."""
