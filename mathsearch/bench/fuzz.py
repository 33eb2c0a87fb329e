"""``mathsearch bench fuzz``: generated and mutated real inputs through the whole pipeline.

Every input of :mod:`mathsearch.bench.fuzz_inputs` goes through extract -> parse -> embed (the
shipped
gcn ONNX model) -> write into a fresh OpenSearch index, inline (no broker), in a runner process
(:mod:`mathsearch.bench.fuzz_runner`) watched from here:

* a **hang** is an input (or an embed/write batch) with no answer within ``input_timeout``
  (``batch_timeout``): the runner is killed, the input recorded, and a new runner goes on with
  the inputs not yet written (writes are idempotent, so re-running them changes nothing);
* a **crash** is an exception escaping a pipeline stage, or the runner dying (a segfault);
* at the end every input is **accounted** for against OpenSearch, by id: each equation id it
  yielded (extracted equations and extraction refusals alike) must be a document of the index
  or a failure record of the index (with a non-empty reason), never both; ``unaccounted``
  counts those that are neither (or both), ``extra`` ids in OpenSearch that no input yielded.

The report gives totals by outcome (``indexed``: every equation of the input indexed,
``failed``: every one a failure record, ``partial``, ``empty``: no equation at all, ``crash``,
``hang``), failure reasons, refusals at extraction, per-input time (p50 / p99 / max, the slowest
inputs), batch times, peak RSS, inputs/s and the machine.
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import resource
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch, helpers
from tqdm import tqdm

from mathsearch.bench.fuzz_inputs import FORMATS
from mathsearch.bench.fuzz_runner import runner_main, tmp_root
from mathsearch.bench.timing import percentile
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec, ensure_failures_index
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.runtime.embedders import encoder_card
from mathsearch.workers.pipeline import JobSpec

logger = logging.getLogger(__name__)

_STARTUP_TIMEOUT = 300.0


@dataclass
class FuzzRun:
    """Parameters of one fuzz run."""

    inputs: int
    seed: int = 0
    formats: tuple[str, ...] = FORMATS
    batch_size: int = 256
    input_timeout: float = 60.0
    batch_timeout: float = 300.0
    data_dir: str | None = None
    numbers: list[int] | None = None  # only these inputs (to replay one); default all
    runners: int = 1


@dataclass
class _State:
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    committed: set[int] = field(default_factory=set)
    hangs: list[dict[str, Any]] = field(default_factory=list)
    crashes: list[dict[str, Any]] = field(default_factory=list)
    batch_seconds: list[float] = field(default_factory=list)
    written_reported: int = 0
    restarts: int = 0
    worker_rss_kb: int = 0


def run_bench_fuzz(
    run: FuzzRun,
    client: OpenSearch,
    *,
    index: str | None = None,
    settings: OpenSearchSettings | None = None,
    keep: bool = False,
    progress: bool = True,
    with_ids: bool = False,
) -> dict[str, Any]:
    """The whole run (see the module docstring); a JSON-ready report (``with_ids``: with the
    ids counted as indexed, ``indexed_ids``)."""
    settings = settings or OpenSearchSettings.from_env()
    alias = index or f"{settings.index_prefix}-fuzz-{uuid.uuid4().hex[:8]}"
    spec = VectorSpec.from_card(encoder_card("gcn"))
    ensure_equation_index(client, alias, [spec], settings)
    failures_index = ensure_failures_index(client, settings)
    job = JobSpec.create(alias, spec.field, failures_index)
    runner_spec = {
        "seed": run.seed,
        "formats": list(run.formats),
        "job": job.to_dict(),
        "batch_size": run.batch_size,
        "data_dir": run.data_dir,
        "runners": run.runners,
    }
    numbers = list(run.numbers) if run.numbers is not None else list(range(run.inputs))
    state = _State()
    cpu_before = _cpu_seconds()
    start = time.perf_counter()
    bar = tqdm(total=len(numbers), unit="input", disable=not progress, desc="fuzz")
    try:
        _supervise(runner_spec, numbers, run, state, bar)
        pipeline_s = time.perf_counter() - start
    finally:
        bar.close()
    cpu_s = {k: round(v - cpu_before[k], 1) for k, v in _cpu_seconds().items()}
    client.indices.refresh(index=f"{alias},{failures_index}")
    report = account(client, alias, failures_index, state)
    report.update(
        {
            "seed": run.seed,
            "formats": list(run.formats),
            "inputs": len(numbers),
            "index": alias,
            "failures_index": failures_index,
            "cpus": os.cpu_count(),
            "runners": run.runners,
            "batch_size": run.batch_size,
            "seconds": round(pipeline_s, 1),
            "inputs_per_s": round(len(numbers) / pipeline_s, 1) if pipeline_s else None,
            "cpu_seconds": cpu_s,
            "cpu_ms_per_input": round(1000 * sum(cpu_s.values()) / max(1, len(numbers)), 2),
            "restarts": state.restarts,
            "batch_seconds": _spread(state.batch_seconds),
            "peak_rss_mb": {
                "bench": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "runner": round(max(state.worker_rss_kb, _children_rss()) / 1024, 1),
            },
            "written_reported": state.written_reported,
        }
    )
    if not with_ids:
        del report["indexed_ids"]
    if not keep:
        drop_run(client, alias, failures_index)
    return report


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) of this process and of its finished runners so far (the
    load-independent cost; OpenSearch's own CPU is not in it)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    runners = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "bench": own.ru_utime + own.ru_stime,
        "runners": runners.ru_utime + runners.ru_stime,
    }


def _children_rss() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


@dataclass
class _Slot:
    """One runner process, the inputs it was given and what it is doing now."""

    numbers: list[int]
    process: Any = None
    conn: Any = None
    current: tuple[str, Any, float] = ("startup", None, 0.0)
    #: the runner's input folder: made here, removed here (a killed runner cannot clean up)
    folder: str | None = None


def _supervise(
    runner_spec: dict[str, Any], numbers: list[int], run: FuzzRun, state: _State, bar: tqdm
) -> None:
    """``run.runners`` runner processes over interleaved shares of ``numbers``; a runner that
    hangs or dies is replaced by one that goes on with its share's unwritten inputs."""
    context = multiprocessing.get_context("fork")
    shares = [numbers[k :: run.runners] for k in range(run.runners)]
    slots = [_Slot(share) for share in shares if share]

    def spawn(slot: _Slot) -> None:
        receiver, sender = context.Pipe(duplex=False)
        slot.folder = tempfile.mkdtemp(prefix="mathsearch-fuzz-", dir=tmp_root())
        slot.process = context.Process(
            target=runner_main, args=(sender, runner_spec, slot.numbers, slot.folder), daemon=True
        )
        slot.process.start()
        sender.close()
        slot.conn, slot.current = receiver, ("startup", None, time.monotonic())

    def finish(slot: _Slot, why: str | None, hang: bool) -> None:
        slot.conn.close()
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join()
        if slot.folder:
            shutil.rmtree(slot.folder, ignore_errors=True)
        if why is not None:
            _give_up(state, slot.current, why, hang=hang)
        done = state.committed | {h["number"] for h in state.hangs}
        done |= {c["number"] for c in state.crashes if c.get("fatal")}
        slot.numbers = [n for n in slot.numbers if n not in done]
        if why is None:  # ended on its own: whatever it did not write is lost, not retried
            for number in slot.numbers:
                entry = {"number": number, "stage": "end", "trace": "never written", "fatal": True}
                state.crashes.append(entry)
            slot.numbers = []
        if slot.numbers:
            state.restarts += 1
            spawn(slot)
        else:
            slots.remove(slot)

    for slot in slots:
        spawn(slot)
    while slots:
        now = time.monotonic()
        deadlines = {id(slot): slot.current[2] + _limit(slot.current[0], run) for slot in slots}
        for slot in list(slots):
            if deadlines[id(slot)] <= now:
                finish(slot, f"no answer in {_limit(slot.current[0], run):.0f} s", hang=True)
        if not slots:
            break
        wait = max(0.0, min(deadlines.get(id(s), now) for s in slots) - now)
        ready = multiprocessing.connection.wait([s.conn for s in slots], timeout=min(wait, 5.0))
        for slot in [s for s in slots if s.conn in ready]:
            try:
                message = slot.conn.recv()
            except EOFError:
                slot.process.join(5)
                finish(slot, f"runner died (exit code {slot.process.exitcode})", hang=False)
                continue
            if _handle(slot, message, state, bar):
                finish(slot, None, hang=False)


def _limit(kind: str, run: FuzzRun) -> float:
    return {"startup": _STARTUP_TIMEOUT, "input": run.input_timeout}.get(kind, run.batch_timeout)


def _handle(slot: _Slot, message: tuple[Any, ...], state: _State, bar: tqdm) -> bool:
    """Apply one runner message; True when the runner has finished its inputs."""
    tag, now = message[0], time.monotonic()
    if tag == "begin":
        slot.current = ("input", message[1], now)
    elif tag == "input":
        _record_input(state, message[1], bar)
        slot.current = ("between", None, now)
    elif tag == "flush":
        slot.current = ("batch", message[1], now)
    elif tag == "committed":
        state.committed.update(message[1])
        state.written_reported += message[2]["written"]
        state.batch_seconds.append(message[3])
        slot.current = ("between", None, now)
    elif tag == "batch-crash":
        for number in message[1]:
            state.crashes.append(
                {"number": number, "stage": "embed-write", "trace": message[2], "fatal": True}
            )
        slot.current = ("between", None, now)
    elif tag == "ready":
        slot.current = ("between", None, now)
    elif tag == "end":
        state.worker_rss_kb = max(state.worker_rss_kb, int(message[1]))
        return True
    return False


def _record_input(state: _State, summary: dict[str, Any], bar: tqdm) -> None:
    number = summary["number"]
    if number not in state.results:
        bar.update(1)
    state.results[number] = summary
    if summary.get("crash"):
        state.crashes.append(
            {"number": number, "stage": "extract-parse", "trace": summary["crash"], "fatal": False}
        )


def _give_up(state: _State, current: tuple[str, Any, float], why: str, *, hang: bool) -> None:
    kind, what, _ = current
    numbers = what if kind == "batch" else [what] if kind == "input" else []
    if not numbers:  # between inputs or at startup: nothing to blame, so nothing to skip
        raise RuntimeError(f"the fuzz runner failed outside any input: {why}")
    for number in numbers:
        entry = {"number": number, "stage": kind, "why": why}
        if hang:
            state.hangs.append(entry)
        else:
            state.crashes.append({**entry, "trace": why, "fatal": True})
        logger.warning("input %d: %s (%s)", number, why, kind)


def account(client: OpenSearch, alias: str, failures_index: str, state: _State) -> dict[str, Any]:
    """Outcomes of every input, checked against the index and the failure records by id."""
    indexed = {hit["_id"] for hit in _scan(client, alias, {"match_all": {}}, False)}
    records = {
        hit["_source"]["eq_id"]: hit["_source"]
        for hit in _scan(
            client, failures_index, {"term": {"index": alias}}, ["eq_id", "stage", "reason"]
        )
    }
    failed = set(records)
    hung = {h["number"] for h in state.hangs}
    crashed = {c["number"] for c in state.crashes}
    outcomes: Counter[str] = Counter(
        "hang" if n in hung else "crash" for n in (hung | crashed) - set(state.results)
    )
    by_format: dict[str, Counter[str]] = {}
    expected: set[str] = set()
    unaccounted: list[dict[str, Any]] = []
    for number, summary in sorted(state.results.items()):
        ids = set(summary["ids"])
        expected |= ids
        missing = sorted((ids - indexed - failed) | (ids & indexed & failed))
        if missing:
            unaccounted.append({"number": number, "kind": summary["kind"], "ids": missing[:3]})
        outcome = _outcome(number, ids, indexed, hung, crashed)
        outcomes[outcome] += 1
        counts = by_format.setdefault(summary["fmt"], Counter())
        counts.update({"inputs": 1, outcome: 1, "equations": len(ids)})
        counts["indexed_equations"] += len(ids & indexed)
    reasons = Counter(f"{r['stage']}:{r['reason']}" for r in records.values())
    refused = Counter(r for s in state.results.values() for r in s["refused"])
    times = [s["seconds"] for s in state.results.values()]
    slowest = sorted(state.results.values(), key=lambda s: -s["seconds"])[:5]
    return {
        "indexed_ids": sorted(indexed & expected),
        "equations": len(expected),
        "indexed": len(indexed & expected),
        "failed": len(failed & expected),
        "outcomes": dict(outcomes),
        "by_format": {fmt: dict(c) for fmt, c in sorted(by_format.items())},
        "crashes": len(state.crashes),
        "crash_samples": state.crashes[:10],
        "hangs": len(state.hangs),
        "hang_samples": state.hangs[:10],
        "unaccounted": _count_missing(state, indexed, failed),
        "unaccounted_samples": unaccounted[:10],
        "extra_ids": len((indexed | failed) - expected),
        "empty_reasons": sum(1 for r in records.values() if not r.get("reason")),
        "duplicate_ids": sum(s["duplicates"] for s in state.results.values()),
        "failure_reasons": dict(reasons.most_common()),
        "extraction_refusals": dict(refused.most_common(20)),
        "seconds_per_input": _spread(times),
        "slowest_inputs": [
            {k: s[k] for k in ("number", "fmt", "kind", "size", "seconds")} for s in slowest
        ],
    }


def _count_missing(state: _State, indexed: set[str], failed: set[str]) -> int:
    total = 0
    for summary in state.results.values():
        ids = set(summary["ids"])
        total += len((ids - indexed - failed) | (ids & indexed & failed))
    return total


def _outcome(
    number: int, ids: set[str], indexed: set[str], hung: set[int], crashed: set[int]
) -> str:
    if number in hung or number in crashed:
        return "hang" if number in hung else "crash"
    if not ids:
        return "empty"
    held = len(ids & indexed)
    return "indexed" if held == len(ids) else "failed" if held == 0 else "partial"


def _spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50), 4),
        "p99": round(percentile(values, 99), 4),
        "max": round(max(values), 4),
    }


def _scan(
    client: OpenSearch, index: str, query: dict[str, Any], source: Any
) -> list[dict[str, Any]]:
    body = {"query": query, "_source": source}
    return list(helpers.scan(client, index=index, query=body, size=5000, scroll="2m"))


def drop_run(client: OpenSearch, alias: str, failures_index: str) -> None:
    """Delete the run's index and its failure records (the node has no delete-by-query)."""
    client.indices.delete(index=f"{alias}-0*", ignore_unavailable=True)
    client.indices.delete_index_template(name=f"{alias}-template", ignore=404)
    client.indices.refresh(index=failures_index)  # records written with refresh=false
    hits = _scan(client, failures_index, {"term": {"index": alias}}, False)
    actions = ({"_op_type": "delete", "_index": failures_index, "_id": h["_id"]} for h in hits)
    helpers.bulk(client, actions, chunk_size=2000, raise_on_error=False)
    client.indices.refresh(index=failures_index)
