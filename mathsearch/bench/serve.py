"""``mathsearch bench serve``: ``mathsearch serve`` under load from another process, on loopback.

The server is a ``mathsearch serve`` process (:class:`ServeProcess`, started by the bench with
the rate limit, in-flight bound and API keys asked for, or one already running at ``--url``);
the load comes from this process: ``clients`` closed-loop asyncio clients (httpx), each sending
``POST /search`` with real formula queries for ``duration`` seconds. A client does not wait after
a 429 / 503 (the worst case for the server).

By default every request runs the server's search profile (``mode`` ``default``: the body
carries only ``latex`` and ``k``, so the shipped profile's first and second stage run, as for a
user), and no query is sent twice while the pool lasts: the pool is the ARQMath 2020-2022 Task 2
and NTCIR-12 topics (:func:`mathsearch.bench.corpus.read_topics`) followed by the unique
equations of the shared hep-th corpus in a fixed random order (:func:`bench_queries`), drawn in
order by every client together; the report counts the requests that repeated a query
(``queries.repeated``) once the pool is spent.

With per-client API keys (the default for a spawned server), each simulated client is one
client of the rate limiter (its own bucket); with a shared key or none they all share one bucket
(loopback is one address).

Reported (:func:`summarize`): requests sent and completed, queries/s (200s per second of the
run), latency p50/p90/p99/max of the 200s and of every answer, counts by status (and connection
errors / timeouts), the error rate ((5xx + connection errors) / sent), the shed rate ((429 + 503)
/ sent), ``/health`` before and after, the server's settings and the machine's cpu count; and
the CPU each answered query cost the server's processes, the local OpenSearch nodes and the load
generator, with the queries/s at which the first two would keep every core busy (``cpu``,
:mod:`mathsearch.bench.cpu_meter`).

Example::

    with ServeProcess(alias, env=serve_env(rate=0, inflight=8)) as url:
        result = asyncio.run(run_load(url, queries, clients=10, duration=10))
    report = summarize(result)
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mathsearch.bench.corpus import default_query_sources, read_topics
from mathsearch.bench.cpu_meter import CpuMeter, cpu_per_query, node_is_local
from mathsearch.bench.timing import percentile
from mathsearch.core.errors import MathsearchOpenSearchError
from mathsearch.core.paths import SOURCE_ROOT
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.queries import Mode

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT",
    "HYBRID",
    "LoadResult",
    "ServeError",
    "ServeProcess",
    "bench_queries",
    "bench_serve",
    "capacity",
    "ensure_bench_index",
    "free_port",
    "meets",
    "run_ladder",
    "run_load",
    "run_rate",
    "serve_env",
    "summarize",
]

REPO = SOURCE_ROOT
#: The server's own search profile (the shipped default unless it was started with
#: ``--profile``): the request names no mode (``--mode default``, the default).
DEFAULT = "default"
#: Modes cycled by ``--mode mix``.
MIX = tuple(mode.value for mode in Mode)
#: The hybrid modes (BM25 and vectors both): ``--mode hybrid``.
HYBRID = tuple(m.value for m, spec in MODES.items() if spec.hybrid)
#: Seconds a single request may take before it counts as a timeout.
REQUEST_TIMEOUT_S = 30.0


class ServeError(MathsearchOpenSearchError):
    """The ``mathsearch serve`` process could not be started or never became healthy."""


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_env(
    *,
    rate: float | None = None,
    burst: int | None = None,
    inflight: int | None = None,
    queue_timeout: float | None = None,
    keys_file: str | None = None,
    workers: str | int | None = None,
) -> dict[str, str]:
    """``MATHSEARCH_SERVE_*`` overrides for a spawned server (unset: the server's defaults)."""
    values = {
        "MATHSEARCH_SERVE_WORKERS": workers,
        "MATHSEARCH_SERVE_RATE": rate,
        "MATHSEARCH_SERVE_BURST": burst,
        "MATHSEARCH_SERVE_MAX_INFLIGHT": inflight,
        "MATHSEARCH_SERVE_QUEUE_TIMEOUT": queue_timeout,
        "MATHSEARCH_SERVE_API_KEYS_FILE": keys_file,
    }
    return {name: str(value) for name, value in values.items() if value is not None}


class ServeProcess:
    """``mathsearch serve --index INDEX`` in its own process on 127.0.0.1 until the block ends.

    ``__enter__`` waits until ``/health`` answers 200 (or raises :class:`ServeError` with the
    tail of the server's log) and returns the base URL.
    """

    def __init__(
        self,
        index: str,
        *,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        log_path: Path | None = None,
        start_timeout: float = 180.0,
    ) -> None:
        self.index = index
        self.env = dict(env or {})
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or Path(tempfile.mkdtemp(prefix="mathsearch-serve-")) / "log"
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
        args = [sys.executable, "-m", "mathsearch", "serve", "--index", self.index]
        args += ["--host", "127.0.0.1", "--port", str(self.port)]
        with self.log_path.open("wb") as out:
            self.process = subprocess.Popen(
                args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            self._wait_healthy()
        except BaseException:
            self.__exit__()
            raise
        return self.url

    def _wait_healthy(self) -> None:
        if self.process is None:
            raise ServeError("the server was not started")
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.process.poll() is not None:
                raise ServeError(
                    f"mathsearch serve exited ({self.process.returncode}):\n{self.log}"
                )
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise ServeError(f"mathsearch serve never became healthy:\n{self.log}")
            time.sleep(0.25)

    @property
    def log(self) -> str:
        """The last lines of the server's output."""
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-3000:]

    @property
    def pid(self) -> int | None:
        """The server's pid (its worker processes run below it) while it runs."""
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def __exit__(self, *exc: object) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)


def write_keys(count: int, folder: Path) -> tuple[Path, list[str]]:
    """``count`` fresh random API keys in ``folder/keys.txt`` (mode 600) and the keys."""
    keys = [secrets.token_urlsafe(24) for _ in range(count)]
    path = folder / "keys.txt"
    path.write_text("# mathsearch bench serve: one key per client\n" + "\n".join(keys) + "\n")
    path.chmod(0o600)
    return path, keys


def bench_queries(
    paths: Sequence[str] | None = None,
    limit: int | None = None,
    *,
    equations: Sequence[str] = (),
    fmt: str | None = None,
    seed: int = 0,
) -> list[str]:
    """Real formula queries, each once: the LaTeX of the ARQMath / NTCIR topic files (default:
    those beside the clone, or the demo's queries when there are none; given files may yield
    none), then the unique equations of ``equations`` (any source ``mathsearch extract`` reads,
    in ``fmt``) shuffled by ``seed``; ``limit`` keeps the first."""
    topics = read_topics(paths if paths is not None else default_query_sources())
    latex = [text for _, text in topics]
    if not latex and paths is None and not equations:
        from mathsearch.stack.demo import QUERIES

        latex = list(QUERIES)
    if equations:
        latex += equation_queries(equations, fmt, seed=seed, skip=set(latex))
    latex = list(dict.fromkeys(latex))
    return latex[:limit] if limit else latex


def equation_queries(
    sources: Sequence[str], fmt: str | None = None, *, seed: int = 0, skip: set[str] | None = None
) -> list[str]:
    """The unique LaTeX of the equations of ``sources`` (failure records skipped), in a random
    order fixed by ``seed``."""
    import random

    from mathsearch.indexer.extract import extract
    from mathsearch.indexer.records import EquationRecord

    seen = set(skip or ())
    out: list[str] = []
    for record in extract(list(sources), fmt):
        if isinstance(record, EquationRecord):
            latex = (record.latex or "").strip()  # MathML-only records (JATS) have none
            if latex and latex not in seen:
                seen.add(latex)
                out.append(latex)
    random.Random(seed).shuffle(out)
    return out


def default_equation_sources() -> list[str]:
    """The shared hep-th equations (``equation.txt``) when they are beside the clone, else
    none: the query pool of ``bench serve`` beyond the topics."""
    from mathsearch.core.paths import SHARED_DATA

    path = SHARED_DATA / "hepth2003" / "equation.txt"
    return [str(path)] if path.is_file() else []


def ensure_bench_index(client: Any, settings: Any, index: str | None = None) -> tuple[str, str]:
    """The equation alias to serve and how it was found: ``index`` when given, else
    ``<prefix>-equations`` or ``<prefix>-demo-equations`` when they hold equations, else the
    bundled demo corpus indexed into ``<prefix>-bench-serve-equations`` (real model vectors)."""
    if index:
        return index, "given"
    prefix = settings.index_prefix
    for alias in (f"{prefix}-equations", f"{prefix}-demo-equations"):
        if client.indices.exists(index=alias) and int(client.count(index=alias)["count"]) > 0:
            return alias, "existing"
    alias = f"{prefix}-bench-serve-equations"
    if client.indices.exists(index=alias) and int(client.count(index=alias)["count"]) > 0:
        return alias, "existing"
    from mathsearch.opensearch.bulk_writer import BulkWriter
    from mathsearch.opensearch.documents import equation_actions
    from mathsearch.opensearch.equation_index import ensure_equation_index
    from mathsearch.opensearch.schema import VectorSpec
    from mathsearch.runtime.embedders import load_embedder
    from mathsearch.stack.demo import demo_records
    from mathsearch.workers.embedding import vectors_of

    parsed, _ = demo_records()
    encoder = load_embedder("gcn")
    spec = VectorSpec.from_card(encoder.card)
    ensure_equation_index(client, alias, [spec], settings)
    vectors = vectors_of(encoder, parsed)
    dicts = [p.to_dict() for p in parsed]
    BulkWriter(client, settings, refresh="end").write(
        equation_actions(alias, dicts, {spec.field: vectors})
    )
    return alias, f"indexed the bundled demo corpus ({len(dicts)} equations)"


@dataclass
class LoadResult:
    """Every answer of one load run: ``(status, seconds)``; status 0 = connection error,
    -1 = timeout."""

    answers: list[tuple[int, float]] = field(default_factory=list)
    wall_s: float = 0.0
    clients: int = 0
    modes: tuple[str, ...] = ()
    errors: Counter[str] = field(default_factory=Counter)
    offered_per_s: float | None = None  # open loop (run_rate): the rate requests were sent at
    pool: int = 0  # distinct queries available
    repeated: int = 0  # requests whose query an earlier request of the run had sent


async def run_load(
    url: str,
    queries: Sequence[str],
    *,
    clients: int,
    duration: float,
    modes: Sequence[str] = (DEFAULT,),
    keys: Sequence[str] = (),
    k: int = 10,
    timeout: float = REQUEST_TIMEOUT_S,
) -> LoadResult:
    """``clients`` closed-loop clients posting ``/search`` for ``duration`` seconds; client
    ``i`` uses ``keys[i % len(keys)]`` when keys are given. The clients draw the requests in
    order from one sequence (:func:`_search_body`), so no query repeats while they last."""
    if not queries:
        raise ValueError("no queries to send")
    result = LoadResult(clients=clients, modes=tuple(modes), pool=len(queries))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    spots = itertools.count()
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        started = time.perf_counter()
        stop = started + duration

        async def client(number: int) -> None:
            headers = _auth(keys, number)
            while time.perf_counter() < stop:
                body = _search_body(queries, modes, next(spots), k)
                began = time.perf_counter()
                status = await _post(http, body, headers, result)
                result.answers.append((status, time.perf_counter() - began))
                if status <= 0:
                    await asyncio.sleep(0.05)  # a refused connection answers at once

        await asyncio.gather(*(client(i) for i in range(clients)))
        result.wall_s = time.perf_counter() - started
    result.repeated = max(0, len(result.answers) - len(queries))
    return result


def _search_body(queries: Sequence[str], modes: Sequence[str], spot: int, k: int) -> dict[str, Any]:
    """The ``spot``-th request of a run: queries in order (cycled once spent), modes cycled;
    the :data:`DEFAULT` mode sends no ``mode`` (the server's profile decides).

    >>> _search_body(["a", "b", "c"], ["default"], 4, 10)
    {'latex': 'b', 'k': 10}
    >>> _search_body(["a", "b"], ["knn", "bm25"], 1, 5)
    {'latex': 'b', 'k': 5, 'mode': 'bm25'}
    """
    body: dict[str, Any] = {"latex": queries[spot % len(queries)], "k": k}
    mode = modes[spot % len(modes)]
    if mode != DEFAULT:
        body["mode"] = mode
    return body


def _auth(keys: Sequence[str], number: int) -> dict[str, str]:
    """The ``number``-th client's (or request's) API key header, none without keys."""
    return {"authorization": f"Bearer {keys[number % len(keys)]}"} if keys else {}


async def _post(
    http: httpx.AsyncClient, body: dict[str, Any], headers: Mapping[str, str], result: LoadResult
) -> int:
    """One ``POST /search``; its status (0: connection error, -1: timeout)."""
    try:
        response = await http.post("/search", json=body, headers=dict(headers))
        return response.status_code
    except httpx.TimeoutException as exc:
        result.errors[type(exc).__name__] += 1
        return -1
    except httpx.TransportError as exc:
        result.errors[type(exc).__name__] += 1
        return 0


async def run_rate(
    url: str,
    queries: Sequence[str],
    *,
    rate: float,
    duration: float,
    modes: Sequence[str] = (DEFAULT,),
    keys: Sequence[str] = (),
    k: int = 10,
    timeout: float = REQUEST_TIMEOUT_S,
    max_connections: int = 256,
    offset: int = 0,
) -> LoadResult:
    """Open loop: request ``i`` is due at ``i / rate`` seconds whatever the earlier ones do, as
    independent users send them, and its latency counts from when it was due (a server that
    falls behind shows it in the percentiles instead of slowing the load down: no coordinated
    omission). Request ``i`` uses ``keys[i % len(keys)]`` when keys are given and the query
    ``offset + i`` of ``queries`` (a ladder's later runs go on where the earlier stopped)."""
    if not queries:
        raise ValueError("no queries to send")
    if rate <= 0 or duration <= 0:
        raise ValueError(f"rate and duration must be positive, not {rate} and {duration}")
    result = LoadResult(modes=tuple(modes), offered_per_s=rate, pool=len(queries))
    total = max(1, round(rate * duration))
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        started = time.perf_counter()

        async def one(number: int) -> None:
            due = started + number / rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            body = _search_body(queries, modes, offset + number, k)
            status = await _post(http, body, _auth(keys, number), result)
            result.answers.append((status, time.perf_counter() - due))

        await asyncio.gather(*(one(i) for i in range(total)))
        result.wall_s = time.perf_counter() - started
    result.repeated = max(0, offset + total - max(offset, len(queries)))
    return result


def meets(summary: Mapping[str, Any], *, p99_ms: float) -> bool:
    """Whether an open-loop run held its rate: no error, nothing shed, every answer's p99 within
    ``p99_ms``, and at least 95% of the offered rate answered 200 per second.

    >>> meets({"error_rate": 0.0, "shed_rate": 0.0, "latency_ms_all": {"p99": 80.0},
    ...        "queries_per_s": 49.0, "offered_per_s": 50}, p99_ms=100)
    True
    """
    p99 = summary.get("latency_ms_all", {}).get("p99")
    offered = float(summary.get("offered_per_s") or 0.0)
    return bool(
        summary.get("error_rate") == 0
        and summary.get("shed_rate") == 0
        and p99 is not None
        and p99 <= p99_ms
        and (summary.get("queries_per_s") or 0.0) >= 0.95 * offered
    )


def capacity(rows: Sequence[Mapping[str, Any]], *, p99_ms: float) -> float | None:
    """The highest offered rate of a ladder that :func:`meets` the bound, with every lower rate
    meeting it too (None when the lowest fails).

    >>> ok = {"error_rate": 0, "shed_rate": 0, "latency_ms_all": {"p99": 10.0}}
    >>> capacity([{**ok, "offered_per_s": 10, "queries_per_s": 10},
    ...           {**ok, "offered_per_s": 20, "queries_per_s": 12}], p99_ms=100)
    10
    """
    best = None
    for row in sorted(rows, key=lambda r: float(r["offered_per_s"])):
        if not meets(row, p99_ms=p99_ms):
            break
        best = row["offered_per_s"]
    return best


async def run_ladder(
    url: str,
    queries: Sequence[str],
    *,
    rates: Sequence[float],
    duration: float,
    p99_ms: float,
    meter: CpuMeter | None = None,
    **load: Any,
) -> list[dict[str, Any]]:
    """Open-loop runs at each rate, lowest first, stopping after the first that misses the
    bound (the rates above it would only pile up); one summary per run, with its CPU per
    query (``cpu``, :func:`~mathsearch.bench.cpu_meter.cpu_per_query`) when ``meter`` is
    given."""
    rows: list[dict[str, Any]] = []
    offset = 0
    for rate in sorted(rates):
        before = meter.sample() if meter else None
        run = await run_rate(url, queries, rate=rate, duration=duration, offset=offset, **load)
        offset += len(run.answers)
        row = summarize(run)
        if meter is not None and before is not None:
            row["cpu"] = measured_cpu(meter, before, run, row)
        row["meets"] = meets(row, p99_ms=p99_ms)
        rows.append(row)
        logger.info("offered %.1f/s: %s q/s, p99 %s ms, meets %s", rate, row["queries_per_s"],
                    row["latency_ms_all"].get("p99"), row["meets"])  # fmt: skip
        if not row["meets"]:
            break
    return rows


def measured_cpu(
    meter: CpuMeter, before: Mapping[str, float | None], run: LoadResult, row: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The CPU per answered query of a run that started at ``before`` (its summary ``row``)."""
    return cpu_per_query(
        before, meter.sample(), answered=int(row["completed"]), wall_s=run.wall_s,
        cores=os.cpu_count() or 1,
    )  # fmt: skip


def _latency(seconds: Sequence[float]) -> dict[str, Any]:
    if not seconds:
        return {"n": 0}
    ms = [s * 1000 for s in seconds]
    return {
        "n": len(ms),
        "p50": round(percentile(ms, 50), 2),
        "p90": round(percentile(ms, 90), 2),
        "p99": round(percentile(ms, 99), 2),
        "max": round(max(ms), 2),
    }


def summarize(result: LoadResult) -> dict[str, Any]:
    """The figures of one run (see the module docstring); pure."""
    sent = len(result.answers)
    statuses = Counter(status for status, _ in result.answers)
    by_status = {str(s): n for s, n in sorted(statuses.items()) if s > 0}
    connection = statuses.get(0, 0)
    timeouts = statuses.get(-1, 0)
    server_errors = sum(n for s, n in statuses.items() if s >= 500 and s != 503)
    shed = statuses.get(429, 0) + statuses.get(503, 0)
    ok = [seconds for status, seconds in result.answers if status == 200]
    answered = [seconds for status, seconds in result.answers if status > 0]
    return {
        "clients": result.clients,
        "offered_per_s": result.offered_per_s,
        "modes": list(result.modes),
        "duration_s": round(result.wall_s, 2),
        "sent": sent,
        "completed": len(answered),
        "ok": len(ok),
        "queries_per_s": round(len(ok) / result.wall_s, 1) if result.wall_s > 0 else None,
        "answers_per_s": round(len(answered) / result.wall_s, 1) if result.wall_s > 0 else None,
        "latency_ms_ok": _latency(ok),
        "latency_ms_all": _latency(answered),
        "by_status": by_status,
        "status_5xx": server_errors,
        "connection_errors": connection,
        "timeouts": timeouts,
        "error_kinds": dict(result.errors),
        "error_rate": round((server_errors + connection + timeouts) / sent, 4) if sent else None,
        "shed_rate": round(shed / sent, 4) if sent else None,
        "queries_pool": result.pool,
        "repeated": result.repeated,
    }


def health(url: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``GET /health``'s status and body (or why it did not answer)."""
    try:
        response = httpx.get(f"{url}/health", timeout=10, headers=dict(headers or {}))
        return {**response.json(), "http_status": response.status_code}
    except (httpx.HTTPError, ValueError) as exc:
        return {"http_status": None, "reason": f"{type(exc).__name__}: {exc}"}


def config(url: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The server's limits (``GET /config``), ``{}`` when it does not tell."""
    try:
        response = httpx.get(f"{url}/config", timeout=10, headers=dict(headers or {}))
        return dict(response.json().get("limits", {})) if response.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}


def bench_serve(
    *,
    url: str | None = None,
    index: str | None = None,
    clients: int = 50,
    duration: float = 60.0,
    mode: str = DEFAULT,
    queries: Sequence[str] | None = None,
    keys: str = "per-client",
    api_key: str | None = None,
    rate: float | None = None,
    burst: int | None = None,
    inflight: int | None = None,
    queue_timeout: float | None = None,
    k: int = 10,
    rates: Sequence[float] | None = None,
    p99_ms: float = 100.0,
    workers: str | int | None = None,
) -> dict[str, Any]:
    """One load run against ``url``, or against a ``mathsearch serve`` this starts over
    ``index`` (see :func:`ensure_bench_index`) with the given overrides; the report.

    ``keys``: ``per-client`` (a spawned server gets one fresh key per client, so each client
    has its own rate-limit bucket), ``shared`` (one key for all), ``none`` (no auth).

    ``rates``: instead of closed-loop clients, open-loop runs of ``duration`` seconds at each
    offered rate (:func:`run_ladder`); the report adds ``ladder`` (one summary per rate) and
    ``capacity_per_s``, the highest rate held with no error, nothing shed and p99 <= ``p99_ms``
    (:func:`capacity`). A spawned server then runs without its rate limit unless ``rate`` says
    otherwise.

    ``workers``: the spawned server's processes (``MATHSEARCH_SERVE_WORKERS``; ``auto``: one per
    core).
    """
    from mathsearch.opensearch.settings import OpenSearchSettings

    latex = list(queries) if queries else bench_queries(equations=default_equation_sources())
    modes = tuple(iter_modes(mode))
    if rates and rate is None:
        rate = 0.0  # capacity is the server's, not the rate limiter's

    def measure(base: str, client_keys: Sequence[str], server_pid: int | None = None) -> None:
        meter = CpuMeter(server_pid, opensearch=node_is_local(OpenSearchSettings.from_env()))
        if not rates:
            before = meter.sample()
            loaded = asyncio.run(
                run_load(base, latex, clients=clients, duration=duration, modes=modes,
                         keys=client_keys, k=k)
            )  # fmt: skip
            report["load"] = summarize(loaded)
            report["load"]["cpu"] = measured_cpu(meter, before, loaded, report["load"])
            return
        rows = asyncio.run(
            run_ladder(base, latex, rates=rates, duration=duration, p99_ms=p99_ms, modes=modes,
                       keys=client_keys, k=k, meter=meter)
        )  # fmt: skip
        report["ladder"] = rows
        report["p99_bound_ms"] = p99_ms
        report["capacity_per_s"] = capacity(rows, p99_ms=p99_ms)
        held = [row for row in rows if row["meets"]]
        report["load"] = held[-1] if held else rows[0]

    report: dict[str, Any] = {
        "machine": {"cpu_count": os.cpu_count(), "python": sys.version.split()[0]},
        "queries": {
            "count": len(latex),
            "source": "given" if queries else "mathir-topics + hep-th equations",
        },
    }
    if url:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        report["server"] = {"url": url, "spawned": False}
        report["health_before"] = health(url, headers)
        report["settings"] = config(url, headers)
        measure(url, [api_key] if api_key else [])
        report["health_after"] = health(url, headers)
        return report
    from mathsearch.opensearch.client import connect

    settings = OpenSearchSettings.from_env()
    alias, how = ensure_bench_index(connect(settings), settings, index)
    with tempfile.TemporaryDirectory(prefix="mathsearch-bench-serve-") as folder:
        client_keys: list[str] = []
        keys_file = None
        if keys != "none":
            path, client_keys = write_keys(clients if keys == "per-client" else 1, Path(folder))
            keys_file = str(path)
        env = serve_env(rate=rate, burst=burst, inflight=inflight, queue_timeout=queue_timeout,
                        keys_file=keys_file, workers=workers)  # fmt: skip
        headers = {"authorization": f"Bearer {client_keys[0]}"} if client_keys else {}
        server = ServeProcess(alias, env=env, log_path=Path(folder) / "serve.log")
        with server as base:
            shown = {n: v for n, v in env.items() if n != "MATHSEARCH_SERVE_API_KEYS_FILE"}
            report["server"] = {
                "url": base, "spawned": True, "index": alias, "index_from": how, "keys": keys,
                "env": shown,
            }  # fmt: skip
            report["health_before"] = health(base, headers)
            report["settings"] = config(base, headers)
            measure(base, client_keys, server.pid)
            report["health_after"] = health(base, headers)
            report["server"]["alive_after"] = server.alive
    return report


def iter_modes(mode: str) -> Iterator[str]:
    """The modes of ``--mode`` (``default``: the server's profile; ``mix``: every mode;
    ``hybrid``: those with BM25 and vectors)."""
    yield from MIX if mode == "mix" else HYBRID if mode == "hybrid" else (mode,)
