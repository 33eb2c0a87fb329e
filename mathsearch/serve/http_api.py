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

Example::

    app = create_app(OpenSearchSettings.from_env(), index="mathsearch-demo-equations")
    uvicorn.run(app, host="127.0.0.1", port=8080)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from opensearchpy import OpenSearch
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from mathsearch.core.errors import (
    ClusterUnavailableError,
    ConfigurationError,
    MappingError,
    MathsearchOpenSearchError,
    QueryError,
    UnknownEquationError,
)
from mathsearch.opensearch.client import connect
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.load_shedding import RETRY_AFTER_S, InflightLimiter
from mathsearch.opensearch.mathml_display import MathMLRenderer
from mathsearch.opensearch.modes import describe_modes
from mathsearch.opensearch.query_encoder import (
    ModelQueryEncoder,
    QueryEncoder,
    QueryFeatures,
    takes_keyword,
)
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.searcher import Searcher
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.serve.admission import LIMITED_PREFIXES, admitted, error, refusal
from mathsearch.serve.api_keys import ApiKeys
from mathsearch.serve.api_schema import (
    ERROR_RESPONSES,
    LibraryOut,
    RenderBody,
    RenderOut,
    SearchBody,
    SearchOut,
)
from mathsearch.serve.rate_limit import RateLimiter

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).with_name("web")
CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _LockedEncoder:
    """One featurisation at a time (the featuriser and converters are not thread-safe)."""

    def __init__(self, inner: QueryEncoder) -> None:
        self.inner = inner
        self.lock = threading.Lock()

    def features(
        self, latex: str, encoders: list[str] | None = None, *, embed: bool = True
    ) -> QueryFeatures:
        with self.lock:
            if not embed and takes_keyword(self.inner, "embed"):
                return self.inner.features(latex, embed=False)  # type: ignore[call-arg]
            if encoders:
                if not takes_keyword(self.inner, "encoders"):
                    raise QueryError("this server's query encoder cannot name encoders")
                return self.inner.features(latex, encoders=encoders)  # type: ignore[call-arg]
            return self.inner.features(latex)


class _Metrics:
    """The server's own registry (several apps in one process stay apart)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "mathsearch_http_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "mathsearch_http_request_seconds",
            "Seconds per request by route",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.rejected = Counter(
            "mathsearch_http_rejected",
            "Requests refused before routing, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "mathsearch_http_in_flight",
            "API requests running now (at most MATHSEARCH_SERVE_MAX_INFLIGHT)",
            registry=self.registry,
        )
        self.searches = Histogram(
            "mathsearch_search_seconds",
            "Seconds per search by mode (featurisation + cluster)",
            ["mode"],
            buckets=_BUCKETS,
            registry=self.registry,
        )


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
        searcher.rerank_vectors.vectors(list(profile.rerank), [("x", "")])
    except QueryError as exc:
        raise ConfigurationError(f"the search profile's second stage: {exc}") from exc
    logger.info(
        "rerank encoders %s loaded in %.1f s",
        ", ".join(profile.rerank),
        time.perf_counter() - started,
    )


async def _json_reason(request: Request, found: dict[str, Any]) -> str:
    """``invalid JSON at line L column C: why`` for a body FastAPI could not decode."""
    try:
        json.loads(await request.body())
    except json.JSONDecodeError as exc:
        return f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
    except (UnicodeDecodeError, ValueError) as exc:
        return f"invalid JSON: {exc}"
    loc = found.get("loc", ())
    at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
    return f"invalid JSON{at}: {found.get('ctx', {}).get('error', found.get('msg', ''))}"


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
    limiter = RateLimiter(settings.serve_rate, settings.serve_burst)
    slots = InflightLimiter(settings.serve_max_inflight, settings.serve_queue_timeout)
    metrics = _Metrics()
    app = FastAPI(
        title="mathsearch",
        summary="Math-aware search over an OpenSearch equation index: hybrid kNN + BM25.",
        version=_version(),
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        broken = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
        if broken is not None:  # not JSON at all: the request, not a field, is at fault
            return error(400, await _json_reason(request, broken))
        details = [
            {"field": ".".join(str(p) for p in e.get("loc", ()) if p != "body"), "msg": e["msg"]}
            for e in exc.errors()
        ]
        first = details[0] if details else {"field": "", "msg": "invalid request"}
        where = f"{first['field']}: " if first["field"] else ""
        return error(422, f"{where}{first['msg']}", details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error(exc.status_code, str(exc.detail))

    @app.exception_handler(UnknownEquationError)
    async def _unknown(_: Request, exc: UnknownEquationError) -> JSONResponse:
        return error(404, str(exc))

    @app.exception_handler(QueryError)
    async def _query(_: Request, exc: QueryError) -> JSONResponse:
        return error(422, str(exc))

    @app.exception_handler(MappingError)
    async def _mapping(_: Request, exc: MappingError) -> JSONResponse:
        return error(503, str(exc))

    @app.exception_handler(ClusterUnavailableError)
    async def _down(_: Request, exc: ClusterUnavailableError) -> JSONResponse:
        # the cluster is down, overloaded or slow (ClusterBusyError): come back later
        response = error(503, str(exc))
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.error("%s %s failed: %r", request.method, request.url.path, exc)
        return error(500, f"internal error ({type(exc).__name__})")

    @app.middleware("http")
    async def _guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        path = request.url.path
        limited = path.startswith(LIMITED_PREFIXES)
        refused = refusal(request, settings, limiter, keys)
        if refused is None and limited:
            refused = await admitted(slots, settings)
        response: Response
        if refused is not None:
            metrics.rejected.labels(refused[1]).inc()
            response = refused[0]
        elif limited:  # holds an in-flight slot until its answer is ready
            metrics.in_flight.inc()
            try:
                response = await call_next(request)
            finally:
                slots.release()
                metrics.in_flight.dec()
        else:
            response = await call_next(request)
        # the page loads nothing from outside; the browser enforces it too
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        route = request.scope.get("route")
        name = getattr(route, "path", None) or ("/static" if path.startswith("/static") else "?")
        metrics.requests.labels(name, request.method, str(response.status_code)).inc()
        metrics.seconds.labels(name).observe(time.perf_counter() - started)
        return response

    @app.post(
        "/search",
        response_model=SearchOut | LibraryOut,
        responses=ERROR_RESPONSES,
        tags=["search"],
    )
    def search(body: SearchBody) -> dict[str, Any]:
        """Search the equation index with a LaTeX query (and words), in any hybrid mode; with
        ``index`` naming a served library index, that library's documents by their math."""
        _check_lengths(settings, body.latex, body.text)
        if body.index and body.index != index:
            return _search_library(body)
        overrides = body.overrides()
        if overrides.get("k", profile.k) > settings.serve_max_k:
            raise QueryError(f"k must be at most {settings.serve_max_k}")
        request = profile.request(body.latex, **overrides)  # MathML only when asked
        response = searcher.similar(body.like, request) if body.like else searcher.search(request)
        metrics.searches.labels(response.mode).observe(response.took_ms / 1000)
        data = response.to_dict()
        data["query_tokens"] = response.query_tokens
        return data

    libraries: dict[str, Any] = {}  # name -> LibraryIndex, described on first use

    def _search_library(body: SearchBody) -> dict[str, Any]:
        from mathsearch.opensearch.library_search import (
            describe_library,
            library_mode,
            search_library,
        )

        name = str(body.index)
        if name not in settings.serve_libraries:
            served = ", ".join((index, *settings.serve_libraries))
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
        metrics.searches.labels(f"library-{response.mode}").observe(response.took_ms / 1000)
        return response.to_dict()

    @app.post("/render", response_model=RenderOut, responses=ERROR_RESPONSES, tags=["search"])
    def render(body: RenderBody) -> RenderOut:
        """LaTeX to Presentation MathML with the indexer's converter (the live preview)."""
        _check_lengths(settings, body.latex, "")
        if not body.latex.strip():
            raise QueryError("empty LaTeX")
        return _render(searcher.renderer, body.latex)

    @app.get("/equations/{eq_id:path}", responses=ERROR_RESPONSES, tags=["equations"])
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

    @app.get("/health", tags=["operations"])
    def health() -> JSONResponse:
        """200 when the cluster answers and the index exists; 503 with the reason otherwise."""
        report, healthy = _health(searcher)
        report["load"] = slots.snapshot()
        return JSONResponse(report, status_code=200 if healthy else 503)

    @app.get("/config", tags=["operations"])
    def config() -> dict[str, Any]:
        """What the page needs (it keeps no copy): the modes and what each is (the mode
        registry's), techniques, the profile's defaults, the limits."""
        mode_info = describe_modes()
        return {
            "index": index,
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
                "api_keys": keys.enabled,
            },
        }

    @app.get("/metrics", tags=["operations"])
    def prometheus() -> Response:
        """Prometheus text exposition of the server's metrics."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/", include_in_schema=False)
    def page() -> Response:
        index_html = WEB_DIR / "index.html"
        if not index_html.is_file():
            return error(404, "the search page is not installed")
        return FileResponse(index_html, media_type="text/html")

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
    with the query model loaded now, so a missing model fails at start-up, not per query."""
    encoder = ModelQueryEncoder(model)
    encoder.features("x")
    return create_app(settings, index, profile=profile, encoder=encoder)


def _check_lengths(settings: OpenSearchSettings, latex: str, text: str) -> None:
    for name, value in (("latex", latex), ("text", text)):
        if len(value) > settings.serve_max_latex:
            raise QueryError(
                f"{name} has {len(value)} characters, the limit is {settings.serve_max_latex}"
            )


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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mathsearch")
    except PackageNotFoundError:
        return "0"
