"""``mathsearch bench outage``: index through real workers while a node is stopped and restarted.

One run, on a cluster of its own (``nodes`` nodes on ``port``.., a state folder of its own, the
shared Redis with queues of its own):

1. bring the cluster up; create the equation index with ``replicas`` replicas and ``nodes``
   primary shards (every node holds some), and give the failures index the same replicas;
2. start ``processes`` ``mathsearch worker`` processes (one pool process each) pointed at
   every node, and run the job from this process (:func:`mathsearch.workers.index_job.run_index`,
   broker
   mode) while a thread sends searches at a steady rate (real LaTeX of the corpus, ``knn`` and
   ``bm25`` in turn, through a client that lists every node);
3. ``stop_after`` seconds into the job stop node ``stop_node``, keep it down ``down_for``
   seconds, start it again and wait for green; optionally warm-shutdown half of the workers
   ``scale_down_after`` seconds into the job (a scale-down: nothing may be lost);
4. check the outcome: the documents in the index are the equations the job reported written,
   by id (no duplicate, every id listed once), the failure records account for the rest
   (written + failed == extracted), and a sample of equations is found by id (``mget``).

The report: search error rate and p50 / p99 latency before / during / after the outage,
equations/s of the job and of each phase (from the index's count, sampled every 2 s), and
the checks. The cluster is stopped at the end, whatever happens.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch, helpers

from mathsearch.bench.timing import latency_summary
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.opensearch.client import connect
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.opensearch.search_request import SearchRequest
from mathsearch.opensearch.searcher import Searcher
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.runtime.embedders import encoder_card
from mathsearch.stack import Stack
from mathsearch.workers.index_job import IndexReport, run_index
from mathsearch.workers.settings import WorkerSettings
from mathsearch.workers.worker_process import start_worker, stop_worker

logger = logging.getLogger(__name__)

PHASES = ("before", "during", "after")


@dataclass(frozen=True)
class OutagePlan:
    """What one run does (the flags of ``mathsearch bench outage``)."""

    nodes: int = 3
    replicas: int = 1
    processes: int = 2
    stop_node: int = 2
    stop_after: float = 30.0
    down_for: float = 60.0
    search_rate: float = 5.0
    port: int = 9220
    tail: float = 10.0
    scale_down_after: float = 0.0
    batch_size: int | None = None
    sample: int = 500


@dataclass
class Timeline:
    """When things happened, in seconds since the job started (``time.monotonic`` based)."""

    start: float = field(default_factory=time.monotonic)
    events: dict[str, float] = field(default_factory=dict)
    counts: list[tuple[float, int]] = field(default_factory=list)

    def mark(self, name: str) -> float:
        self.events[name] = round(time.monotonic() - self.start, 2)
        logger.info("t=%.1f s: %s", self.events[name], name)
        return self.events[name]

    def phase(self, t: float) -> str:
        stop, green = self.events.get("node_stopping"), self.events.get("green_again")
        if stop is None or t < stop:
            return "before"
        return "during" if green is None or t < green else "after"


class SearchLoad(threading.Thread):
    """Searches at ``rate`` per second until stopped; each one's time, mode, latency, error."""

    def __init__(
        self, client: OpenSearch, alias: str, queries: Sequence[str], rate: float, clock: Timeline
    ) -> None:
        super().__init__(daemon=True, name="search-load")
        self.searcher = Searcher(client, alias)
        # queries the query side cannot read are no outage errors: left out (and the encoder
        # is warm before the first timed search)
        self.queries = [q for q in queries if _readable(self.searcher, q)]
        if not self.queries:
            raise ValueError("no query of the corpus is readable")
        self.rate = rate
        self.clock = clock
        self.samples: list[dict[str, Any]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        modes = (Mode.KNN, Mode.BM25)
        i = 0
        next_at = time.monotonic()
        while not self.halt.is_set():
            latex, mode = self.queries[i % len(self.queries)], modes[i % 2]
            i += 1
            started = time.monotonic()
            error = detail = None
            try:
                self.searcher.search(SearchRequest(latex=latex, mode=mode, k=10))
            except Exception as exc:  # every failure counts; the load goes on
                error, detail = type(exc).__name__, str(exc)[:200]
            took = (time.monotonic() - started) * 1000
            t = started - self.clock.start
            sample = {"t": t, "mode": mode.value, "ms": took, "error": error, "detail": detail}
            self.samples.append(sample)
            next_at = max(next_at + 1.0 / self.rate, time.monotonic())
            self.halt.wait(max(0.0, next_at - time.monotonic()))

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for phase in PHASES:
            rows = [s for s in self.samples if self.clock.phase(s["t"]) == phase]
            ok = [s["ms"] for s in rows if s["error"] is None]
            errors: dict[str, int] = {}
            for row in rows:
                if row["error"]:
                    errors[row["error"]] = errors.get(row["error"], 0) + 1
            span = (max(s["t"] for s in rows) - min(s["t"] for s in rows)) if rows else 0.0
            out[phase] = {
                "searches": len(rows),
                "errors": sum(errors.values()),
                "error_rate": round(sum(errors.values()) / len(rows), 4) if rows else None,
                "error_kinds": errors,
                "error_examples": sorted({r["detail"] for r in rows if r["detail"]})[:5],
                "latency_ms": latency_summary(ok, span),
                "by_mode": {
                    mode: latency_summary(
                        [s["ms"] for s in rows if s["mode"] == mode and not s["error"]], span
                    )
                    for mode in ("knn", "bm25")
                },
            }
        return out


def _readable(searcher: Searcher, latex: str) -> bool:
    try:
        searcher.encoder.features(latex)
    except Exception:  # an unreadable query: not an availability error
        return False
    return True


def run_bench_outage(
    items: Sequence[EquationRecord | Failure],
    plan: OutagePlan,
    *,
    settings: OpenSearchSettings | None = None,
    worker_settings: WorkerSettings | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """The whole benchmark (see the module docstring); a JSON-ready report."""
    settings = settings or OpenSearchSettings.from_env()
    worker_settings = worker_settings or WorkerSettings.from_env()
    state = settings.state_dir / f"bench-outage-{plan.port}"
    shutil.rmtree(state, ignore_errors=True)
    own = dataclasses.replace(settings, url=f"http://127.0.0.1:{plan.port}", state_dir=state)
    stack = Stack(own, worker_settings.redis_url)
    ws = dataclasses.replace(worker_settings, queue_prefix=f"outage{uuid.uuid4().hex[:6]}-")
    workers: list[subprocess.Popen] = []
    try:
        logger.info("starting %d node(s) on port %d..", plan.nodes, plan.port)
        stack.up(plan.nodes, with_redis=False)
        cluster = dataclasses.replace(
            stack.node_settings(plan.nodes), shards=plan.nodes, replicas=plan.replicas
        )
        client = connect(cluster, maxsize=4)  # the job, the outage and the counter share it
        alias = f"{cluster.index_prefix}-outage"
        spec = VectorSpec.from_card(encoder_card(ws.encoders[0]))
        ensure_equation_index(client, alias, [spec], cluster)
        failures = ensure_failures_index(client, cluster)
        client.indices.put_settings(index=failures, body={"number_of_replicas": plan.replicas})
        if not wait_green(client, None, plan.nodes, 180):
            raise TimeoutError("the new cluster did not get green within 180 s")
        env = {"MATHSEARCH_OPENSEARCH_URL": cluster.url}
        for n in range(plan.processes):
            logger.info("starting worker %d/%d..", n + 1, plan.processes)
            workers.append(start_worker(ws, 1, hostname=f"outage{n}", env=env))
        clock = Timeline()
        report, load = _run(
            items, plan, stack=stack, client=client, cluster=cluster, ws=ws, alias=alias,
            workers=workers, clock=clock, progress=progress,
        )  # fmt: skip
        result: dict[str, Any] = {
            "equations": report.equations,
            "cpus": os.cpu_count(),
            "plan": dataclasses.asdict(plan),
            "job": report.to_dict(),
            "timeline": clock.events,
            "outage_during_indexing": clock.events.get("node_stopped", 1e9)
            < clock.events.get("job_done", 0),
            "indexing_eq_per_s": round(report.eq_per_s, 1),
            "indexing_by_phase": _rates(clock),
            "searches": load.summary(),
            "checks": verify(
                client, alias, failures, items=items, report=report, sample=plan.sample
            ),
        }
        result["ok"] = result["checks"]["ok"] and report.complete
        return result
    finally:
        for process in workers:
            stop_worker(process, timeout=60)
        logger.info("stopping the cluster..")
        stack.stop_nodes(plan.nodes)
        shutil.rmtree(state, ignore_errors=True)


def _run(
    items: Sequence[EquationRecord | Failure],
    plan: OutagePlan,
    *,
    stack: Stack,
    client: OpenSearch,
    cluster: OpenSearchSettings,
    ws: WorkerSettings,
    alias: str,
    workers: list[subprocess.Popen],
    clock: Timeline,
    progress: bool,
) -> tuple[IndexReport, SearchLoad]:
    """The job, the search load, the outage (and the scale-down), together."""
    queries = query_latex(items)
    load = SearchLoad(connect(cluster), alias, queries, plan.search_rate, clock)
    halt = threading.Event()
    outage = threading.Thread(target=_outage, args=(stack, client, alias, plan, clock), daemon=True)
    counter = threading.Thread(target=_count, args=(client, alias, clock, halt), daemon=True)
    threads = [load, outage, counter]
    if plan.scale_down_after > 0:
        leaving = workers[len(workers) - len(workers) // 2 :]
        threads.append(threading.Thread(target=_scale_down, args=(leaving, plan, clock)))
    for thread in threads:
        thread.start()
    try:
        report = run_index(
            items, alias, client=client, settings=cluster, worker_settings=ws,
            batch_size=plan.batch_size, progress=progress, stall_timeout=900,
        )  # fmt: skip
        clock.mark("job_done")
        outage.join()  # the outage runs its course even when the job was quicker
        time.sleep(plan.tail)
    finally:
        load.halt.set()
        halt.set()
        for thread in threads:
            thread.join(timeout=120)
    return report, load


def _outage(
    stack: Stack, client: OpenSearch, alias: str, plan: OutagePlan, clock: Timeline
) -> None:
    time.sleep(plan.stop_after)
    clock.mark("node_stopping")
    stack.node_stop(plan.stop_node)
    clock.mark("node_stopped")
    time.sleep(plan.down_for)
    clock.mark("node_starting")
    stack.node_start(plan.stop_node)
    clock.mark("node_started")
    if wait_green(client, alias, plan.nodes, 600):
        clock.mark("green_again")
    else:
        logger.error("the cluster did not get green again within 600 s")


def wait_green(client: OpenSearch, index: str | None, nodes: int, limit: float) -> bool:
    """Wait until ``index`` (None: the cluster) is green with ``nodes`` nodes; False on time."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            health = client.cluster.health(index=index, wait_for_status="green", params={
                "timeout": "10s"}, request_timeout=20)  # fmt: skip
            if health["status"] == "green" and health["number_of_nodes"] == nodes:
                return True
        except Exception as exc:  # a node still joining
            logger.debug("not green yet: %s", exc)
        time.sleep(1)
    return False


def _scale_down(leaving: list[subprocess.Popen], plan: OutagePlan, clock: Timeline) -> None:
    time.sleep(plan.scale_down_after)
    clock.mark(f"scale_down_{len(leaving)}_workers")
    for process in leaving:
        stop_worker(process, timeout=300)  # SIGTERM: warm shutdown
    clock.mark("scaled_down")


def _count(client: OpenSearch, alias: str, clock: Timeline, halt: threading.Event) -> None:
    while not halt.wait(2.0):
        try:
            count = client.count(index=alias)["count"]
        except Exception:  # during the outage a count may fail; skip the sample
            continue
        clock.counts.append((round(time.monotonic() - clock.start, 2), count))


def _rates(clock: Timeline) -> dict[str, float | None]:
    """Equations/s made searchable in each outage phase and, with a scale-down, before it
    started and after it ended (until the job was done), from the sampled counts."""
    rates = {
        phase: _rate([(t, n) for t, n in clock.counts if clock.phase(t) == phase])
        for phase in PHASES
    }
    events = clock.events
    start = next((v for k, v in events.items() if k.startswith("scale_down_")), None)
    if start is not None and "scaled_down" in events:
        end = events.get("job_done", float("inf"))
        rates["before_scale_down"] = _rate([(t, n) for t, n in clock.counts if t < start])
        after = [(t, n) for t, n in clock.counts if events["scaled_down"] <= t <= end]
        rates["after_scale_down"] = _rate(after)
    return rates


def _rate(points: list[tuple[float, int]]) -> float | None:
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return None
    return round((points[-1][1] - points[0][1]) / (points[-1][0] - points[0][0]), 1)


def query_latex(items: Sequence[EquationRecord | Failure], count: int = 64) -> list[str]:
    """Real query LaTeX: ``count`` equations of the corpus spread over it (short ones)."""
    pool = [
        i.latex
        for i in items
        if isinstance(i, EquationRecord) and i.latex is not None and 8 < len(i.latex) < 300
    ]
    if not pool:
        raise ValueError("no equations to take queries from")
    step = max(1, len(pool) // count)
    return pool[::step][:count]


def verify(
    client: OpenSearch,
    alias: str,
    failures_index: str,
    *,
    items: Sequence[EquationRecord | Failure],
    report: IndexReport,
    sample: int,
) -> dict[str, Any]:
    """Every equation indexed or failed, once; the index agrees with what the job reported."""
    client.indices.refresh(index=f"{alias},{failures_index}")
    count = client.count(index=alias)["count"]
    indexed = [hit["_id"] for hit in helpers.scan(client, index=alias, _source=False, size=2000)]
    failed = [
        hit["_source"]["eq_id"]
        for hit in helpers.scan(
            client,
            index=failures_index,
            query={"query": {"term": {"index": alias}}},
            _source=["eq_id"],
            size=2000,
        )
    ]
    expected = {item.eq_id for item in items}
    distinct, failed_ids = set(indexed), set(failed)
    written = [i for i in distinct if i in expected]
    picks = random.Random(0).sample(written, min(sample, len(written)))
    found = 0
    for first in range(0, len(picks), 500):
        docs = client.mget(index=alias, body={"ids": picks[first : first + 500]}, _source=False)
        found += sum(1 for doc in docs["docs"] if doc.get("found"))
    checks = {
        "count": count,
        "distinct_ids": len(distinct),
        "duplicates": len(indexed) - len(distinct),
        "failure_records": len(failed),
        "job_written": report.written,
        "job_failed": report.failed,
        "extracted": len(items),
        "in_both": len(distinct & failed_ids),
        "missing": len(expected - distinct - failed_ids),
        "unexpected": len((distinct | failed_ids) - expected),
        "sampled_by_id": len(picks),
        "sampled_found": found,
    }
    checks["ok"] = (
        count == len(distinct) == report.written
        and len(failed) == len(failed_ids) == report.failed
        and report.written + report.failed == len(items)
        and checks["in_both"] == checks["missing"] == checks["unexpected"] == 0
        and found == len(picks)
    )
    return checks
