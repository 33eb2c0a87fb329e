"""The runner process of :mod:`mathsearch.bench.fuzz`: fuzz inputs through the real
pipeline.

:func:`run_input` takes one :class:`~mathsearch.bench.fuzz_inputs.FuzzInput` through extraction
(:func:`mathsearch.indexer.extract.extract` on the file, as ``mathsearch index`` reads it; a
``latex``
input is one equation record as a worker receives it) and the parse stage
(:func:`mathsearch.workers.pipeline.parse_stage`). Equation ids get the input's prefix
(``fz<seed>-<n>/``)
so that inputs never share an id. The parsed equations of many inputs are then embedded and
written together by :func:`mathsearch.workers.pipeline.embed_write_stage` (the gcn ONNX model, real
OpenSearch), one batch of about ``batch_size`` equations at a time - the watchdog's unit.

:func:`runner_main` is the process's loop: it reports each input's start, result and each
batch's start and end over a pipe, so the parent can tell a hang (no answer in time) or a crash
(an exception escaping a stage, or the process dying) and the input that caused it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathsearch.bench.fuzz_documents import generate
from mathsearch.bench.fuzz_inputs import Corpus, FuzzInput
from mathsearch.indexer.extract import extract
from mathsearch.indexer.records import EquationRecord, Failure, scrub_surrogates
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.workers.pipeline import JobSpec, embed_write_stage, parse_stage

logger = logging.getLogger(__name__)


@dataclass
class InputResult:
    """One input after extraction and parsing: its equation ids, refusals, payload or crash."""

    number: int
    fmt: str
    kind: str
    size: int
    seconds: float = 0.0
    ids: list[str] = field(default_factory=list)
    duplicates: int = 0
    refused: list[str] = field(default_factory=list)
    parsed: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    crash: str | None = None

    def summary(self) -> dict[str, Any]:
        """What goes back to the parent (no payload)."""
        keys = ("number", "fmt", "kind", "size", "seconds", "ids", "duplicates", "refused", "crash")
        return {key: getattr(self, key) for key in keys}


def input_prefix(seed: int, number: int) -> str:
    """The id prefix of input ``number`` of run ``seed``: ``fz<seed>-<number>/``."""
    return f"fz{seed}-{number}/"


def extract_input(
    item: FuzzInput, prefix: str, folder: Path, settings: IndexerSettings
) -> list[EquationRecord | Failure]:
    """The extracted items of one input, their ids prefixed (extraction itself never raises)."""
    if item.fmt == "latex":
        text = item.data if isinstance(item.data, str) else item.data.decode("utf-8", "replace")
        record = EquationRecord(eq_id="0", doc_id="", position=0, source=item.name)
        setattr(record, item.field, text)
        items: list[EquationRecord | Failure] = [record]
    else:
        path = folder / item.name
        data = item.data if isinstance(item.data, bytes) else item.data.encode()
        path.write_bytes(data)
        try:
            items = list(extract([str(path)], item.fmt, settings))
        finally:
            path.unlink(missing_ok=True)
    for found in items:
        found.eq_id = prefix + found.eq_id
        found.doc_id = prefix + found.doc_id
    return items


def run_input(
    item: FuzzInput, prefix: str, folder: Path, job: JobSpec, settings: IndexerSettings
) -> InputResult:
    """Extract and parse one input; an exception escaping either is recorded as its crash."""
    result = InputResult(item.number, item.fmt, item.kind, item.size)
    start = time.perf_counter()
    try:
        if item.field == "record":  # a JSON record straight to the parse stage (worker side)
            record = {**json.loads(item.data), "eq_id": prefix + "0"}
            result.ids = [record["eq_id"]]
            payload = parse_stage(job, f"in{item.number}", [record])
            result.parsed, result.failures = payload["parsed"], payload["failures"]
            result.seconds = time.perf_counter() - start
            return result
        items = extract_input(item, prefix, folder, settings)
        seen: set[str] = set()
        for found in items:
            if found.eq_id in seen:
                result.duplicates += 1
            seen.add(found.eq_id)
            result.ids.append(scrub_surrogates(found.eq_id))  # the id OpenSearch stores
        records = [found.to_dict() for found in items if isinstance(found, EquationRecord)]
        refused = [found for found in items if isinstance(found, Failure)]
        result.refused = [f"{found.stage}:{found.reason}" for found in refused]
        result.failures = [found.to_dict() for found in refused]
        if records:
            payload = parse_stage(job, f"in{item.number}", records)
            result.parsed = payload["parsed"]
            result.failures += payload["failures"]
    except Exception:
        result.crash = traceback.format_exc()[-3000:]
        result.parsed, result.failures = [], []
    result.seconds = time.perf_counter() - start
    return result


def payload_chunks(results: list[InputResult], size: int) -> list[dict[str, Any]]:
    """Embed-stage payloads of several inputs' parse results, about ``size`` equations each
    (the pipeline's batches: an input's equations may span two of them)."""
    parsed = [p for r in results for p in r.parsed]
    failures = [f for r in results for f in r.failures]
    chunks = [
        {"parsed": parsed[first : first + size], "failures": [], "seconds": {}}
        for first in range(0, len(parsed), size)
    ] or [{"parsed": [], "failures": [], "seconds": {}}]
    for first in range(0, len(failures), size):
        chunks.append({"parsed": [], "failures": failures[first : first + size], "seconds": {}})
    return chunks


def runner_main(
    conn: Any, spec: dict[str, Any], numbers: list[int], folder: str | None = None
) -> None:
    """The runner process: inputs ``numbers`` of the run described by ``spec`` (seed, formats,
    job, batch_size, data_dir), reporting over ``conn`` (see the module docstring). Input files
    go to ``folder`` (the supervisor's, which it removes even when it has to kill the runner),
    else to a temporary folder of the runner's own."""
    from mathsearch.opensearch.client import connect
    from mathsearch.opensearch.settings import OpenSearchSettings
    from mathsearch.runtime.embedders import load_embedder

    logging.getLogger().setLevel(logging.ERROR)  # refusals are data, not log noise
    if spec.get("runners", 1) > 1:  # one ONNX thread per runner: no oversubscribed cores
        os.environ.setdefault("MATHSEARCH_EMBED_THREADS", "1")
    settings = IndexerSettings.from_env()
    os_settings = OpenSearchSettings.from_env()
    client = connect(os_settings)
    corpus = Corpus.load(Path(spec["data_dir"]) if spec.get("data_dir") else None)
    job = JobSpec.from_dict(spec["job"])
    embedders = [load_embedder(spec.get("encoder", "gcn"))]
    formats = tuple(spec["formats"])
    conn.send(("ready", None))
    pending: list[InputResult] = []
    size = 0
    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="mathsearch-fuzz-", dir=tmp_root())
            )
        where = Path(folder)
        for number in numbers:
            conn.send(("begin", number))
            item = generate(corpus, spec["seed"], number, formats)
            result = run_input(item, input_prefix(spec["seed"], number), where, job, settings)
            conn.send(("input", result.summary()))
            pending.append(result)
            size += len(result.parsed) + len(result.failures)
            if size >= spec["batch_size"]:
                _flush(conn, pending, spec["batch_size"], job, client, os_settings, embedders)
                pending, size = [], 0
        _flush(conn, pending, spec["batch_size"], job, client, os_settings, embedders)
    conn.send(("end", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))


def _flush(  # noqa: PLR0917 - the runner loop's state, passed through
    conn: Any,
    pending: list[InputResult],
    size: int,
    job: JobSpec,
    client: Any,
    settings: Any,
    embedders: Any,
) -> None:
    if not pending:
        return
    numbers = [r.number for r in pending]
    conn.send(("flush", numbers))
    start = time.perf_counter()
    summary = {"written": 0, "failed": 0}
    try:
        for number, payload in enumerate(payload_chunks(pending, size)):
            entry = embed_write_stage(
                job, f"b{numbers[0]}-{number}", payload, client=client, settings=settings,
                embedders=embedders,
            )  # fmt: skip
            summary["written"] += entry["written"]
            summary["failed"] += entry["failed"]
    except Exception:
        conn.send(("batch-crash", numbers, traceback.format_exc()[-3000:]))
        return
    conn.send(("committed", numbers, summary, time.perf_counter() - start))


def tmp_root() -> str | None:
    """``/dev/shm`` where there is one (input files never touch the disk), else the default."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None
