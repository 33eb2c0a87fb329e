"""The search modes, one module each, registered by their :class:`Mode`.

Each module holds its body builder, how it runs and how it explains a hit's score
(:class:`~mathsearch.opensearch.modes.base.SearchMode`); :data:`MODES` is the one registry that
the searcher, ``SearchRequest.parameters``, the tuning grid, the benchmarks, the API schema, the
command line and the search page read. A new mode: a member of
:class:`~mathsearch.opensearch.queries.Mode`, a module here with a ``MODE`` instance, and its
line below.

Example::

    MODES[Mode.FUSION].parameters   # ('alpha', 'depth', 'normalization', 'combination')
    describe_modes()["rrf"]["summary"]
"""

from __future__ import annotations

from typing import Any

from mathsearch.opensearch.modes import bm25, fusion, knn, knn_rescore, rescore, rrf
from mathsearch.opensearch.modes.base import ModeContext, SearchMode
from mathsearch.opensearch.queries import Mode

__all__ = ["MODES", "ModeContext", "SearchMode", "describe_modes", "mode_spec"]

#: Every mode, by its enum, in the enum's order.
MODES: dict[Mode, SearchMode] = {
    spec.mode: spec
    for spec in (knn.MODE, bm25.MODE, rescore.MODE, knn_rescore.MODE, fusion.MODE, rrf.MODE)
}


def mode_spec(mode: Mode | str) -> SearchMode:
    """The registered mode of ``mode`` (its enum or value)."""
    return MODES[Mode(mode)]


def describe_modes() -> dict[str, dict[str, Any]]:
    """Each mode's summary, ranking parameters and explained subqueries (for ``GET /config``
    and the search page)."""
    return {
        mode.value: {
            "summary": spec.summary,
            "parameters": list(spec.parameters),
            "subqueries": spec.subqueries(),
            "fused": spec.fused,
        }
        for mode, spec in MODES.items()
    }
