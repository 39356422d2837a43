"""The web console at /ui: static HTML, one script and one stylesheet served by the API
process; the script reads /v1/console and /v1 with the key the user signs in with."""

from schedulerstream.api.ui.api import router
from schedulerstream.api.ui.pages import install

__all__ = ["install", "router"]
