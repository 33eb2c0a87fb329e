"""The equation route of ``mathsearch serve`` (OpenAPI tag ``equations``).

* ``GET /equations/{eq_id}`` - an equation's stored fields (no vectors); 404 when unknown.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from starlette.exceptions import HTTPException as StarletteHTTPException

from mathsearch.serve.api_schema import ERROR_RESPONSES
from mathsearch.serve.serve_state import ServeState

logger = logging.getLogger(__name__)

__all__ = ["equation_router"]


def equation_router(state: ServeState) -> APIRouter:
    """``GET /equations/{eq_id}`` over ``state``'s index."""
    router = APIRouter()
    index, client, searcher = state.index, state.client, state.searcher

    @router.get("/equations/{eq_id:path}", responses=ERROR_RESPONSES, tags=["equations"])
    def equation(eq_id: str) -> dict[str, Any]:
        """One equation's stored fields (vectors left out); 404 when the index lacks it."""
        found = searcher.call(
            lambda: client.search(
                index=index,
                body={"size": 1, "query": {"ids": {"values": [eq_id]}}},
                _source_excludes=["vec_*"],
            )
        )
        hits = found["hits"]["hits"]
        if not hits:
            raise StarletteHTTPException(404, f"no equation {eq_id!r} in {index}")
        return {"eq_id": eq_id, **searcher.renderer.fill_source(hits[0]["_source"])}

    return router
