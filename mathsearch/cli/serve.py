"""``mathsearch serve``: run the HTTP API and the search page (uvicorn)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import textwrap
from typing import Any

from mathsearch.cli.common import RAW_HELP, fail

__all__ = ["add_serve", "run_serve"]

logger = logging.getLogger(__name__)


def add_serve(commands: Any) -> None:
    """Register ``serve`` on the ``mathsearch`` subparsers."""
    parser = commands.add_parser(
        "serve",
        help="HTTP API (POST /search, /render, GET /equations/ID, /health, /metrics) + page",
        description="Serve one equation index over HTTP: the JSON API (schema at "
        "/openapi.json) and the search page at / (LaTeX box with live MathML preview, mode and "
        "weight controls, results grouped by document with their score breakdown). Limits, "
        "rate, load shedding and API keys come from MATHSEARCH_SERVE_* (docs/serving.md).",
        epilog=textwrap.dedent("""\
            limits (environment; docs/serving.md):
              MATHSEARCH_SERVE_MAX_BODY=16384      bytes per POST body (411 / 413)
              MATHSEARCH_SERVE_MAX_LATEX=2000      characters of LaTeX / words (422)
              MATHSEARCH_SERVE_MAX_K=100           results per search (422)
              MATHSEARCH_SERVE_RATE=10 / _BURST=20 requests/s per client or API key (429)
              MATHSEARCH_SERVE_MAX_INFLIGHT=8      API requests at once; as many more wait
              MATHSEARCH_SERVE_QUEUE_TIMEOUT=1.0   seconds of waiting, then 503 + Retry-After
              MATHSEARCH_SERVE_WORKERS=1           server processes (auto: one per core);
                                                   the limits above are per process

            API keys (off unless set):
              MATHSEARCH_SERVE_API_KEYS_FILE=FILE  one key a line (16+ characters, # comments)
              MATHSEARCH_SERVE_API_KEY=KEY         one key
              with keys on, every route but GET /health, / (the page), /static/* and
              /openapi.json needs "Authorization: Bearer KEY" or "X-API-Key: KEY" (401
              otherwise); keys are compared in constant time, logged only as key-<sha256[:12]>,
              and each key gets its own rate-limit bucket.

            examples:
              mathsearch serve                                   http://127.0.0.1:8080/
              mathsearch serve --index mathsearch-demo-equations --port 9000
              mathsearch serve --profile report/best_profile.json --host 0.0.0.0
              mathsearch serve --workers auto                    one process per core
              mathsearch serve --index papers-eq --library papers  a library's own index too
              curl -s localhost:8080/search -H 'content-type: application/json' \\
                  -d '{"latex": "E = mc^2", "index": "papers", "text_field": "body"}'
              curl -s localhost:8080/search -H 'content-type: application/json' \\
                  -d '{"latex": "E = mc^2", "mode": "rrf", "k": 5}'
              MATHSEARCH_SERVE_API_KEYS_FILE=keys.txt mathsearch serve
              curl -s localhost:8080/search -H "Authorization: Bearer $KEY" \\
                  -H 'content-type: application/json' -d '{"latex": "x^2"}'
            """),
        formatter_class=RAW_HELP,
    )
    parser.add_argument("--index", help="equation index alias (default <prefix>-equations)")
    parser.add_argument("--host", help="listen address (default MATHSEARCH_SERVE_HOST, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default MATHSEARCH_SERVE_PORT, 8080)")
    parser.add_argument(
        "--profile", metavar="P", help="search profile (JSON from `mathsearch tune`)"
    )
    parser.add_argument("--model", help="ONNX model for the queries (default MATHSEARCH_MODEL)")
    parser.add_argument(
        "--library",
        metavar="INDEX",
        action="append",
        default=[],
        help="a library index enriched with math.* that POST /search may name in `index` "
        "(repeat; default MATHSEARCH_SERVE_LIBRARIES)",
    )
    parser.add_argument(
        "--workers",
        metavar="N",
        help="server processes, each with its own model and limits; auto: one per core "
        "(default MATHSEARCH_SERVE_WORKERS, 1)",
    )


def run_serve(args: argparse.Namespace) -> int:
    """Handler of ``mathsearch serve``: serves until interrupted."""
    from dataclasses import replace

    import uvicorn

    from mathsearch.core.errors import MathsearchOpenSearchError
    from mathsearch.opensearch.schema import equations_alias
    from mathsearch.opensearch.settings import OpenSearchSettings, parse_serve_workers
    from mathsearch.serve.http_api import APP_ENV, load_profile, served_app

    try:
        settings = OpenSearchSettings.from_env()
        if args.workers is not None:
            settings = replace(
                settings, serve_workers=parse_serve_workers(args.workers, "--workers")
            )
        if args.host:
            settings = replace(settings, serve_host=args.host)
        if args.port is not None:
            settings = replace(settings, serve_port=args.port)
        if args.library:
            libraries = tuple(dict.fromkeys(args.library))
            settings = replace(settings, serve_libraries=libraries)
            os.environ["MATHSEARCH_SERVE_LIBRARIES"] = ",".join(libraries)  # worker processes
        profile = load_profile(args.profile)
        index = equations_alias(settings, args.index)
        app = served_app(settings, index, profile, args.model)
    except MathsearchOpenSearchError as exc:
        return fail(str(exc))
    except Exception as exc:
        from mathsearch.export.errors import ExportError

        if isinstance(exc, ExportError):
            return fail(str(exc))
        raise
    logger.info(
        "serving %s on http://%s:%d/ (profile: %s; rate %g/s burst %d; %d in flight, wait %g s; "
        "API keys %s; %d process(es))",
        index,
        settings.serve_host,
        settings.serve_port,
        args.profile or profile.label,
        settings.serve_rate,
        settings.serve_burst,
        settings.serve_max_inflight,
        settings.serve_queue_timeout,
        "on" if settings.serve_api_keys_file or settings.serve_api_key else "off",
        settings.serve_workers,
    )
    host, port, log_level = settings.serve_host, settings.serve_port, "warning"
    if settings.serve_workers == 1:
        uvicorn.run(app, host=host, port=port, log_level=log_level)
        return 0
    # N processes, each building its own app (client, model, limits) from the same choices
    del app  # built above only to fail early on a bad model, profile or keys file
    os.environ[APP_ENV] = json.dumps({"index": index, "profile": args.profile, "model": args.model})
    uvicorn.run(
        "mathsearch.serve.http_api:app_from_env",
        factory=True,
        workers=settings.serve_workers,
        host=host,
        port=port,
        log_level=log_level,
    )
    return 0
