"""The REST API (FastAPI): tenants authenticate with API keys; writes produce events and answer
with the new version; reads come from the read model (DESIGN.md §6)."""

from schedulerstream.api.app import create_app, from_environment

__all__ = ["create_app", "from_environment"]
