"""The operations routes of ``mathsearch serve`` (OpenAPI tag ``operations``).

* ``GET /health`` - 200 when the cluster answers and the index exists, else 503, with why.
* ``GET /config`` - the modes and each one's ``mode_info`` (the search page's only source),
  normalisations, combinations, the profile's defaults and the limits.
* ``GET /metrics`` - Prometheus text: requests by route and status, latency, rejections.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from mathsearch.core.errors import MathsearchOpenSearchError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.modes import describe_modes
from mathsearch.opensearch.searcher import Searcher
from mathsearch.serve.serve_state import ServeState

logger = logging.getLogger(__name__)

__all__ = ["operations_router"]


def operations_router(state: ServeState) -> APIRouter:
    """``GET /health``, ``GET /config`` and ``GET /metrics`` of the app ``state`` belongs to."""
    router = APIRouter()
    settings, profile = state.settings, state.profile

    @router.get("/health", tags=["operations"])
    def health() -> JSONResponse:
        """200 when the cluster answers and the index exists; 503 with the reason otherwise."""
        report, healthy = _health(state.searcher)
        report["load"] = state.slots.snapshot()
        return JSONResponse(report, status_code=200 if healthy else 503)

    @router.get("/config", tags=["operations"])
    def config() -> dict[str, Any]:
        """What the page needs (it keeps no copy): the modes and what each is (the mode
        registry's), techniques, the profile's defaults, the limits."""
        mode_info = describe_modes()
        return {
            "index": state.index,
            "libraries": list(settings.serve_libraries),
            "modes": list(mode_info),
            "mode_info": mode_info,
            "normalizations": [n.value for n in Normalization],
            "combinations": [c.value for c in Combination],
            "defaults": {k: v for k, v in profile.to_dict().items() if k != "format"},
            "limits": {
                "max_latex_chars": settings.serve_max_latex,
                "max_k": settings.serve_max_k,
                "max_body_bytes": settings.serve_max_body,
                "rate_per_s": settings.serve_rate,
                "burst": settings.serve_burst,
                "max_inflight": settings.serve_max_inflight,
                "queue_timeout_s": settings.serve_queue_timeout,
                "api_keys": state.keys.enabled,
            },
        }

    @router.get("/metrics", tags=["operations"])
    def prometheus() -> Response:
        """Prometheus text exposition of the server's metrics."""
        return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return router


def _health(searcher: Searcher) -> tuple[dict[str, Any], bool]:
    report: dict[str, Any] = {"status": "unavailable", "index": searcher.index}
    client = searcher.client
    try:
        cluster = searcher.call(client.cluster.health)
        report["cluster"] = {"name": cluster["cluster_name"], "status": cluster["status"]}
        counted = searcher.call(lambda: client.count(index=searcher.index))
        report["equations"] = int(counted["count"])
        report["vector_field"] = searcher.default_field()
    except MathsearchOpenSearchError as exc:
        report["reason"] = str(exc)
        return report, False
    report["status"] = "ok" if report["cluster"]["status"] != "red" else "degraded"
    return report, report["status"] == "ok"
