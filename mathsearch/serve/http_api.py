"""``mathsearch serve``: the HTTP API and the search page over one equation index.

Routes (the OpenAPI schema is at ``/openapi.json``; no Swagger UI, which would load from a CDN):

* ``POST /search`` - :class:`~mathsearch.serve.api_schema.SearchBody` in,
  :class:`~mathsearch.serve.api_schema.SearchOut` out; unset ranking fields come from the
  search profile (``--profile``), hits carry their stored MathML. ``encoders`` (families)
  searches their vector fields together (an unknown encoder, one without a model here, or a
  field the index lacks is a 422 with the reason). ``like`` (an indexed equation's id) instead
  of ``latex`` searches for similar equations, the equation itself left out; 404 when unknown.
* ``POST /render`` - LaTeX to Presentation MathML with the indexer's own converter (the page's
  live preview); unreadable LaTeX is a 422 with the converter's reason.
* ``GET /equations/{eq_id}`` - an equation's stored fields (no vectors); 404 when unknown.
* ``GET /health`` - 200 when the cluster answers and the index exists, else 503, with why.
* ``GET /config`` - the modes and each one's ``mode_info`` (the search page's only source),
  normalisations, combinations, the profile's defaults and the limits.
* ``GET /metrics`` - Prometheus text: requests by route and status, latency, rejections.
* ``GET /`` and ``/static/*`` - the search page (``mathsearch/serve/web/``), nothing fetched from
  outside (every answer carries ``Content-Security-Policy: default-src 'self'``).

Limits (``MATHSEARCH_SERVE_*``, see :mod:`mathsearch.opensearch.settings`): a POST needs a
``Content-Length`` (411) no larger than ``MAX_BODY`` (413); LaTeX and words longer than
``MAX_LATEX`` characters and ``k`` above ``MAX_K`` are 422s; each client (by address, or by
API key id when keys are on) gets ``RATE`` requests per second with bursts of ``BURST`` on the
API routes (429 + ``Retry-After``). At most ``MAX_INFLIGHT`` API requests run at once, as many
more wait up to ``QUEUE_TIMEOUT`` seconds, the rest are 503 + ``Retry-After`` at once
(:mod:`mathsearch.opensearch.load_shedding`); an overloaded or timed-out cluster is a 503 +
``Retry-After``
too. With API keys (``MATHSEARCH_SERVE_API_KEYS_FILE`` / ``MATHSEARCH_SERVE_API_KEY``,
:mod:`mathsearch.serve.api_keys`) every route but ``GET /health``, the page (``/``,
``/static/*``) and
``/openapi.json`` needs ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (401 otherwise).
Every error is ``{"error": {"status", "reason", "details"?}}``, an unexpected one a JSON 500.

Each group of routes is a router of its own (:mod:`~mathsearch.serve.search_routes`,
:mod:`~mathsearch.serve.equation_routes`, :mod:`~mathsearch.serve.operations_routes`,
:mod:`~mathsearch.serve.page_routes`) over one :class:`~mathsearch.serve.serve_state.ServeState`;
:func:`create_app` builds that state, the exception handlers
(:mod:`~mathsearch.serve.error_handlers`) and the request guard
(:mod:`~mathsearch.serve.request_guard`), and includes the routers.

Example::

    app = create_app(OpenSearchSettings.from_env(), index="mathsearch-demo-equations")
    uvicorn.run(app, host="127.0.0.1", port=8080)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from opensearchpy import OpenSearch

from mathsearch.core.errors import ConfigurationError, QueryError
from mathsearch.core.heap import freeze_heap
from mathsearch.opensearch.client import connect
from mathsearch.opensearch.load_shedding import InflightLimiter
from mathsearch.opensearch.query_encoder import (
    ModelQueryEncoder,
    QueryEncoder,
    QueryFeatures,
    takes_keyword,
)
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.searcher import Searcher
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.serve.api_keys import ApiKeys
from mathsearch.serve.equation_routes import equation_router
from mathsearch.serve.error_handlers import install_error_handlers
from mathsearch.serve.operations_routes import operations_router
from mathsearch.serve.page_routes import WEB_DIR, page_router
from mathsearch.serve.rate_limit import RateLimiter
from mathsearch.serve.request_guard import CSP, request_guard
from mathsearch.serve.search_routes import search_router
from mathsearch.serve.serve_metrics import ServeMetrics
from mathsearch.serve.serve_state import ServeState

logger = logging.getLogger(__name__)

__all__ = [
    "APP_ENV",
    "CSP",
    "WEB_DIR",
    "app_from_env",
    "create_app",
    "load_profile",
    "served_app",
]


class _LockedEncoder:
    """One featurisation at a time (the featuriser and converters are not thread-safe).

    It takes every keyword :class:`~mathsearch.opensearch.query_encoder.ModelQueryEncoder`
    takes and passes on those the inner encoder takes too: above all ``extra`` and
    ``defer_extra``, so that the second stage's query vectors come from the same pass (and embed
    while the first stage runs) instead of a second featurisation in the request thread, and
    ``on_tokens``. An inner encoder without ``extra`` gets none; the second stage then embeds
    the query itself.
    """

    def __init__(self, inner: QueryEncoder) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def features(
        self,
        latex: str,
        encoders: list[str] | None = None,
        *,
        embed: bool = True,
        extra: Sequence[str] = (),
        defer_extra: bool = False,
        on_tokens: Callable[[list[str]], None] | None = None,
    ) -> QueryFeatures:
        kwargs: dict[str, Any] = {}
        if on_tokens is not None and takes_keyword(self.inner, "on_tokens"):
            kwargs["on_tokens"] = on_tokens
        if not embed and takes_keyword(self.inner, "embed"):
            kwargs["embed"] = False
        if encoders:
            if not takes_keyword(self.inner, "encoders"):
                raise QueryError("this server's query encoder cannot name encoders")
            kwargs["encoders"] = encoders
        if embed and extra and takes_keyword(self.inner, "extra"):
            kwargs["extra"] = list(extra)
            if defer_extra and takes_keyword(self.inner, "defer_extra"):
                kwargs["defer_extra"] = True
        with self.lock:
            return self.inner.features(latex, **kwargs)  # type: ignore[call-arg]


def _warm_rerank(searcher: Searcher, profile: SearchProfile) -> None:
    """Load the profile's second-stage encoders now (a few seconds for the seed-size towers),
    so that the first searches do not queue behind the loading and get shed as busy.

    Raises:
        ConfigurationError: the profile names a rerank encoder that cannot be loaded.
    """
    if not (profile.rerank and profile.rerank_window):
        return
    started = time.perf_counter()
    try:
        if takes_keyword(searcher.encoder, "extra"):  # the query's pass embeds them
            searcher.encoder.features("x", extra=list(profile.rerank))  # type: ignore[call-arg]
        else:  # the second stage embeds the query itself
            searcher.rerank_vectors.vectors(list(profile.rerank), [("x", "")])
    except QueryError as exc:
        raise ConfigurationError(f"the search profile's second stage: {exc}") from exc
    logger.info(
        "rerank encoders %s loaded in %.1f s",
        ", ".join(profile.rerank),
        time.perf_counter() - started,
    )


def create_app(
    settings: OpenSearchSettings,
    index: str,
    *,
    profile: SearchProfile | None = None,
    client: OpenSearch | None = None,
    encoder: QueryEncoder | None = None,
    api_keys: ApiKeys | None = None,
) -> FastAPI:
    """The ASGI app serving ``index`` (an equation alias); see the module docstring.

    ``api_keys`` default: those of the settings (none: no auth).

    Raises:
        ConfigurationError: an API keys file that cannot be read or holds a short key.
    """
    profile = profile or SearchProfile()
    keys = api_keys if api_keys is not None else ApiKeys.from_settings(settings)
    client = client or connect(settings, pool_maxsize=max(10, settings.serve_max_inflight))
    searcher = Searcher(client, index, encoder=_LockedEncoder(encoder or ModelQueryEncoder()))
    _warm_rerank(searcher, profile)
    state = ServeState(
        settings=settings,
        index=index,
        profile=profile,
        client=client,
        searcher=searcher,
        keys=keys,
        limiter=RateLimiter(settings.serve_rate, settings.serve_burst),
        slots=InflightLimiter(settings.serve_max_inflight, settings.serve_queue_timeout),
        metrics=ServeMetrics(),
    )
    app = FastAPI(
        title="mathsearch",
        summary="Math-aware search over an OpenSearch equation index: hybrid kNN + BM25.",
        version=_version(),
        docs_url=None,
        redoc_url=None,
    )
    app.state.serve = state  # the routers' state, for an embedding application or a test
    install_error_handlers(app)
    app.middleware("http")(request_guard(state))
    app.include_router(search_router(state))
    app.include_router(equation_router(state))
    app.include_router(operations_router(state))
    app.include_router(page_router())
    if WEB_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
    return app


#: The environment variable that carries ``mathsearch serve``'s choices (index, profile, model)
#: to worker processes, which build their own app with :func:`app_from_env`.
APP_ENV = "MATHSEARCH_SERVE_APP"


def app_from_env() -> FastAPI:
    """The app of one ``mathsearch serve --workers N`` process (uvicorn's factory).

    Each worker process builds its own client, encoder and limits from the settings and the
    JSON ``{"index", "profile", "model"}`` that the serve command put in ``MATHSEARCH_SERVE_APP``;
    rate limits, in-flight slots and ``/metrics`` are therefore per process.

    Raises:
        ConfigurationError: ``MATHSEARCH_SERVE_APP`` is missing or not that JSON.
    """
    import json
    import os

    from mathsearch.core.errors import ConfigurationError

    try:
        choices = json.loads(os.environ[APP_ENV])
        index = str(choices["index"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"{APP_ENV} must hold the serve command's JSON choices (index, profile, model)"
        ) from exc
    settings = OpenSearchSettings.from_env()
    return served_app(settings, index, load_profile(choices.get("profile")), choices.get("model"))


def load_profile(path: str | None) -> SearchProfile:
    """The search profile at ``path`` (JSON from ``mathsearch tune``), else the shipped one."""
    return SearchProfile.load(path) if path else SearchProfile.default()


def served_app(
    settings: OpenSearchSettings, index: str, profile: SearchProfile, model: str | None
) -> FastAPI:
    """What ``mathsearch serve`` (and each of its worker processes) serves: :func:`create_app`
    with the query model loaded now, so a missing model fails at start-up, not per query; the
    start-up heap is then frozen out of the garbage collector's full passes
    (:func:`~mathsearch.core.heap.freeze_heap`)."""
    encoder = ModelQueryEncoder(model)
    encoder.features("x")
    app = create_app(settings, index, profile=profile, encoder=encoder)
    freeze_heap()  # the start-up heap out of full collections (no 40 ms pauses per request)
    return app


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mathsearch")
    except PackageNotFoundError:
        return "0"
