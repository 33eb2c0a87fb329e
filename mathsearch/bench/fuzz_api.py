r"""``mathsearch bench fuzz-api``: generated and mutated requests through the API, no 5xx allowed.

Requests (:func:`fuzz_requests`, seeded, reproducible) start from real formula queries (the
ARQMath / NTCIR topics) and are mutated: byte flips, truncation, inserted specials (JSON and
Lucene syntax, painless code, ``\u0000``), deep nesting, invalid UTF-8, huge inputs, wrong JSON
types, huge and non-finite numbers, unknown fields, random content types and methods, on
``/search``, ``/render``, ``/equations/{id}`` and the operations routes. Each goes through the
ASGI app in this process (:class:`fastapi.testclient.TestClient`) against the real node.

A *crash* is an exception out of the app or a 5xx other than a 503 (an overloaded or absent
cluster, which is an answer); so is an error answer that is not JSON with a reason. The report
counts answers by status and crashes (0 expected) with the first few examples, and the latency.

Example::

    report = fuzz_api(create_app(settings, alias), inputs=2000, seed=1)
    report["crashes"]  # 0
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from mathsearch.bench.timing import percentile

logger = logging.getLogger(__name__)

__all__ = ["FuzzRequest", "fuzz_api", "fuzz_requests", "is_crash"]

SPECIALS = (
    '"}},{"script":{"source":"System.exit(0)"}}',
    "* OR _id:*",
    "doc['vec_gcn_v1'].value",
    '{"$ref": "#"}',
    "\\u0000",
    "\x00",
    '+-&&||!(){}[]^"~*?:\\/',
    "'; DROP TABLE equations; --",
    "<script>alert(1)</script>",
    "\\frac{\\frac{\\frac{",
    "}}}}}}",
    "\ud800",
    "\u202e",
    "%00%ff",
    "$$",
    "\\begin{array}",
    "params._source",
)
CONTENT_TYPES = (
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin-1",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/xml",
    "",
)
FIELDS = ("latex", "text", "mode", "alpha", "k", "window", "depth", "normalization",
          "combination", "rank_constant", "max_df", "filters", "group", "explain", "field",
          "encoders", "weights")  # fmt: skip
WEIRD_VALUES: tuple[Any, ...] = (
    None, True, 0, -1, 1, 10**40, -(10**40), 1e308, -1e308, 0.5, "", "x", "rrf", "knn", [],
    [1, 2], {}, {"a": {"b": {"c": 1}}}, ["gcn"], ["gcn", "nope"], [0.5, 0.5], "NaN",
)  # fmt: skip


@dataclass(frozen=True)
class FuzzRequest:
    """One request: method, path, headers and the raw body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    kind: str


def _mutate(rng: random.Random, text: str, max_latex: int) -> str:
    choice = rng.randrange(8)
    if choice == 0 and text:  # truncate
        return text[: rng.randrange(len(text))]
    if choice == 1:  # insert a special
        at = rng.randrange(len(text) + 1)
        return text[:at] + rng.choice(SPECIALS) + text[at:]
    if choice == 2:  # nest
        depth = rng.choice((10, 100, 500))
        return "{" * depth + text + "}" * rng.choice((0, depth))
    if choice == 3:  # huge: just over or far over the limit
        return (text or "x") * (max_latex // max(1, len(text or "x")) + rng.choice((1, 2, 5)))
    if choice == 4:  # random characters
        return "".join(chr(rng.randrange(1, 0x2FFF)) for _ in range(rng.randrange(1, 60)))
    if choice == 5:
        return rng.choice(SPECIALS)
    return text


def _byte_flips(rng: random.Random, raw: bytes) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randrange(1, 6)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def _search_body(rng: random.Random, latex: str, max_latex: int) -> dict[str, Any]:
    body: dict[str, Any] = {"latex": _mutate(rng, latex, max_latex)}
    for _ in range(rng.randrange(0, 4)):
        name = rng.choice(FIELDS)
        body[name] = rng.choice(WEIRD_VALUES)
    if rng.random() < 0.2:
        body["filters"] = {
            "doc_ids": [rng.choice(SPECIALS)],
            "terms": {rng.choice(("symbols", "doc_id", "latex", "_id")): [rng.choice(SPECIALS)]},
            "ranges": {rng.choice(("position", "indexed_at", "x")): [rng.choice(WEIRD_VALUES)] * 2},
        }
    if rng.random() < 0.1:
        body[rng.choice(SPECIALS)] = rng.choice(WEIRD_VALUES)
    return body


def fuzz_requests(
    seeds: Sequence[str], count: int, *, seed: int = 0, max_latex: int = 2000
) -> Iterator[FuzzRequest]:
    """``count`` requests mutated from the LaTeX ``seeds`` (reproducible from ``seed``)."""
    rng = random.Random(seed)
    seeds = list(seeds) or ["x^2"]
    for _ in range(count):
        latex = rng.choice(seeds)
        kind = rng.choices(
            ("search", "render", "raw", "equation", "get", "method"), (50, 15, 15, 8, 6, 6)
        )[0]
        headers = {"content-type": "application/json"}
        if kind in ("search", "render", "raw"):
            path = "/render" if kind == "render" else "/search"
            body = (
                {"latex": _mutate(rng, latex, max_latex)}
                if kind == "render"
                else _search_body(rng, latex, max_latex)
            )
            raw = json.dumps(body, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
            if kind == "raw":
                raw = rng.choice(
                    (
                        lambda r: _byte_flips(rng, r),
                        lambda r: r[: rng.randrange(len(r) + 1)],
                        lambda r: r.replace(b'"', b"\xff\xfe", 1),
                        lambda r: b"[" * 5000 + b"]" * 5000,
                        lambda r: b'{"latex": ' + b"9" * 5000 + b"}",
                        lambda r: b'{"latex": "x", "k": NaN, "alpha": Infinity}',
                        lambda r: b"",
                    )
                )(raw)
            if rng.random() < 0.25:
                headers["content-type"] = rng.choice(CONTENT_TYPES)
            yield FuzzRequest("POST", path, headers, raw, kind)
        elif kind == "equation":
            ident = quote(_mutate(rng, latex, 200)[:300], safe="", errors="surrogatepass")
            yield FuzzRequest("GET", f"/equations/{ident}", {}, b"", kind)
        elif kind == "get":
            yield FuzzRequest("GET", rng.choice(("/health", "/config", "/openapi.json")), {}, b"",
                              kind)  # fmt: skip
        else:
            method = rng.choice(("PUT", "DELETE", "PATCH", "GET", "OPTIONS"))
            yield FuzzRequest(method, rng.choice(("/search", "/render", "/equations")), headers,
                              b'{"latex": "x"}', kind)  # fmt: skip


def is_crash(status: int, content_type: str, body: bytes) -> str | None:
    """Why an answer counts as a crash (``None``: it does not)."""
    if status >= 500 and status != 503:
        return f"status {status}"
    if status >= 400:
        if "json" not in content_type:
            return f"status {status} without JSON ({content_type})"
        try:
            reason = json.loads(body)["error"]["reason"]
        except (ValueError, KeyError, TypeError):
            return f"status {status} without error.reason"
        if not isinstance(reason, str) or not reason:
            return f"status {status} with an empty reason"
    return None


def fuzz_api(
    app: Any,
    *,
    inputs: int,
    seeds: Sequence[str],
    seed: int = 0,
    max_latex: int = 2000,
    progress: bool = False,
) -> dict[str, Any]:
    """Send :func:`fuzz_requests` through ``app`` in-process; the report (see the module)."""
    from fastapi.testclient import TestClient

    from mathsearch.bench.corpus import progress_bar

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise
    http = TestClient(app, raise_server_exceptions=True)
    statuses: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    crashes: list[dict[str, Any]] = []
    latencies: list[float] = []
    started = time.perf_counter()
    bar = progress_bar(progress, total=inputs, desc="fuzz-api", unit="req")
    for request in fuzz_requests(seeds, inputs, seed=seed, max_latex=max_latex):
        kinds[request.kind] += 1
        began = time.perf_counter()
        try:
            response = http.request(
                request.method, request.path, headers=request.headers, content=request.body
            )
            why = is_crash(
                response.status_code, response.headers.get("content-type", ""), response.content
            )
            statuses[str(response.status_code)] += 1
        except Exception as exc:  # the crash the fuzz looks for: counted, shown, never raised
            why = f"exception {type(exc).__name__}: {exc}"
            statuses["exception"] += 1
        latencies.append((time.perf_counter() - began) * 1000)
        if why is not None:
            crashes.append({"why": why[:300], "method": request.method, "path": request.path[:200],
                            "body": request.body[:200].decode("utf-8", "replace")})  # fmt: skip
        bar.update(1)
    bar.close()
    wall = time.perf_counter() - started
    return {
        "inputs": inputs,
        "seed": seed,
        "by_status": dict(sorted(statuses.items())),
        "by_kind": dict(sorted(kinds.items())),
        "crashes": len(crashes),
        "crash_examples": crashes[:10],
        "latency_ms": {
            "p50": round(percentile(latencies, 50), 2),
            "p99": round(percentile(latencies, 99), 2),
            "max": round(max(latencies), 2),
        }
        if latencies
        else {},
        "requests_per_s": round(inputs / wall, 1) if wall > 0 else None,
        "wall_s": round(wall, 1),
    }
