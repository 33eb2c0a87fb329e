"""The search page of ``mathsearch serve``: ``GET /`` (``web/index.html``), left out of the schema.

The page's own files (``/static/*``) are a mount of :data:`WEB_DIR` that
:func:`~mathsearch.serve.http_api.create_app` adds to the app (a router carries no mounts).
"""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

from mathsearch.serve.admission import error

logger = logging.getLogger(__name__)

__all__ = ["WEB_DIR", "page_router"]

#: The search page's files (``index.html``, ``app.js``, ...), served as they are.
WEB_DIR = Path(__file__).with_name("web")


def page_router() -> APIRouter:
    """``GET /``: the search page, or a JSON 404 when it is not installed."""
    router = APIRouter()

    @router.get("/", include_in_schema=False)
    def page() -> Response:
        index_html = WEB_DIR / "index.html"
        if not index_html.is_file():
            return error(404, "the search page is not installed")
        return FileResponse(index_html, media_type="text/html")

    return router
