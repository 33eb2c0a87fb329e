"""The search routes of ``mathsearch serve`` (OpenAPI tag ``search``).

* ``POST /search`` - :class:`~mathsearch.serve.api_schema.SearchBody` in,
  :class:`~mathsearch.serve.api_schema.SearchOut` out (or, with ``index`` naming a served
  library index, :class:`~mathsearch.serve.api_schema.LibraryOut`).
* ``POST /render`` - LaTeX to Presentation MathML with the indexer's own converter.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.mathml_display import MathMLRenderer
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.serve.api_schema import (
    ERROR_RESPONSES,
    LibraryOut,
    RenderBody,
    RenderOut,
    SearchBody,
    SearchOut,
)
from mathsearch.serve.serve_state import ServeState

logger = logging.getLogger(__name__)

__all__ = ["search_router"]


def search_router(state: ServeState) -> APIRouter:
    """``POST /search`` and ``POST /render`` over ``state``'s index."""
    router = APIRouter()
    settings, profile, searcher = state.settings, state.profile, state.searcher

    @router.post(
        "/search",
        response_model=SearchOut | LibraryOut,
        responses=ERROR_RESPONSES,
        tags=["search"],
    )
    def search(body: SearchBody) -> dict[str, Any]:
        """Search the equation index with a LaTeX query (and words), in any hybrid mode; with
        ``index`` naming a served library index, that library's documents by their math."""
        _check_lengths(settings, body.latex, body.text)
        if body.index and body.index != state.index:
            return _search_library(state, body)
        overrides = body.overrides()
        if overrides.get("k", profile.k) > settings.serve_max_k:
            raise QueryError(f"k must be at most {settings.serve_max_k}")
        request = profile.request(body.latex, **overrides)  # MathML only when asked
        response = searcher.similar(body.like, request) if body.like else searcher.search(request)
        state.metrics.searches.labels(response.mode).observe(response.took_ms / 1000)
        data = response.to_dict()
        data["query_tokens"] = response.query_tokens
        return data

    @router.post("/render", response_model=RenderOut, responses=ERROR_RESPONSES, tags=["search"])
    def render(body: RenderBody) -> RenderOut:
        """LaTeX to Presentation MathML with the indexer's converter (the live preview)."""
        _check_lengths(settings, body.latex, "")
        if not body.latex.strip():
            raise QueryError("empty LaTeX")
        return _render(searcher.renderer, body.latex)

    return router


def _search_library(state: ServeState, body: SearchBody) -> dict[str, Any]:
    """``POST /search`` with ``index`` naming a served library index: its documents by math."""
    from mathsearch.opensearch.library_search import (
        describe_library,
        library_mode,
        search_library,
    )

    settings, profile, searcher = state.settings, state.profile, state.searcher
    client, libraries = state.client, state.libraries
    name = str(body.index)
    if name not in settings.serve_libraries:
        served = ", ".join((state.index, *settings.serve_libraries))
        raise QueryError(f"index {name!r} is not served here; served: {served}")
    if body.like:
        raise QueryError("like searches equations: leave out index")
    k = body.k or profile.k
    if k > settings.serve_max_k:
        raise QueryError(f"k must be at most {settings.serve_max_k}")
    if name not in libraries:
        libraries[name] = searcher.call(lambda: describe_library(client, name))
    mode = library_mode(body.mode.value if body.mode else None, profile.mode.value)
    response = searcher.call(
        lambda: search_library(
            client, name, body.latex, text=body.text, text_field=body.text_field,
            text_weight=0.5 if body.text_weight is None else body.text_weight,
            mode=mode,
            k=k, alpha=profile.alpha if body.alpha is None else body.alpha,
            depth=body.depth or profile.depth, library=libraries[name],
            encoder=searcher.encoder, profile=profile.label,
        )
    )  # fmt: skip
    state.metrics.searches.labels(f"library-{response.mode}").observe(response.took_ms / 1000)
    return response.to_dict()


def _render(renderer: MathMLRenderer, latex: str) -> RenderOut:
    """``POST /render``: the converter's MathML (display style) and unknown macros, or a
    :class:`QueryError` with the reason it cannot read the LaTeX."""
    from mathsearch.indexer.errors import IndexerError
    from mathsearch.indexer.mathml_tree import to_mathml

    (result,) = renderer.convert_batch([latex])
    if isinstance(result, IndexerError):
        reason = getattr(result, "reason", "") or "unreadable"
        raise QueryError(f"cannot read the LaTeX ({reason}): {result}")
    return RenderOut(
        latex=latex,
        mathml=to_mathml(result.tree, display=True),
        unknown_macros=list(result.unknown_macros),
    )


def _check_lengths(settings: OpenSearchSettings, latex: str, text: str) -> None:
    for name, value in (("latex", latex), ("text", text)):
        if len(value) > settings.serve_max_latex:
            raise QueryError(
                f"{name} has {len(value)} characters, the limit is {settings.serve_max_latex}"
            )
