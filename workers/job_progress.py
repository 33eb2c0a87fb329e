"""Where an indexing job stands: one entry per batch and stage, safe under redelivery.

Each stage of a batch records ``{"n": equations, "failed": k, "seconds": t}`` under the batch id
in a Redis hash per job and stage (``mathsearch:job:<id>:<stage>``). Entries are *set*, never
incremented, so a batch that is redelivered and run twice is counted once. The client that
enqueued the job reads the hashes for its progress bar and its summary; ``LocalProgress`` is the
same in memory for ``mathsearch index --inline``.

Stages: ``parsed`` (parse task done), ``embedded`` (vectors computed), ``done`` (written, with
its failure records), ``lost`` (a batch given up after its last retry, with the reason).

Example::

    progress = RedisProgress(redis.Redis.from_url(url), "job-1")
    progress.mark("parsed", "b0", {"n": 128, "failed": 2, "seconds": 0.05})
    progress.snapshot().parsed   # 128
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

logger = logging.getLogger(__name__)

STAGES = ("parsed", "embedded", "done", "lost")
KEY_TTL_S = 7 * 24 * 3600


@dataclass
class Snapshot:
    """Totals over the batches of one job."""

    parsed: int = 0
    embedded: int = 0
    written: int = 0
    failed: int = 0
    batches_done: int = 0
    batches_lost: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    failures_by_stage: dict[str, int] = field(default_factory=dict)
    lost: dict[str, dict[str, Any]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "finished": sorted(self.finished)}


def summarise(entries: dict[str, dict[str, dict[str, Any]]]) -> Snapshot:
    """Totals of ``{stage: {batch: entry}}`` (pure)."""
    snap = Snapshot()
    for stage, batches in entries.items():
        for batch, entry in batches.items():
            if stage == "lost":
                if batch not in entries.get("done", {}):
                    snap.batches_lost += 1
                    snap.lost[batch] = entry
                    snap.finished.add(batch)
                continue
            seconds = entry.get("seconds") or {}
            for name, value in seconds.items() if isinstance(seconds, dict) else ():
                snap.seconds[name] = snap.seconds.get(name, 0.0) + float(value)
            if stage == "parsed":
                snap.parsed += int(entry.get("n", 0))
            elif stage == "embedded":
                snap.embedded += int(entry.get("n", 0))
            elif stage == "done":
                snap.batches_done += 1
                snap.finished.add(batch)
                snap.written += int(entry.get("written", 0))
                snap.failed += int(entry.get("failed", 0))
                for name, count in (entry.get("failures_by_stage") or {}).items():
                    snap.failures_by_stage[name] = snap.failures_by_stage.get(name, 0) + count
    return snap


class Progress(Protocol):
    def mark(self, stage: str, batch: str, entry: dict[str, Any]) -> None: ...

    def snapshot(self) -> Snapshot: ...


class LocalProgress:
    """In-memory progress of an inline job."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, dict[str, Any]]] = {stage: {} for stage in STAGES}

    def mark(self, stage: str, batch: str, entry: dict[str, Any]) -> None:
        self.entries[stage][batch] = entry

    def snapshot(self) -> Snapshot:
        return summarise(self.entries)


class RedisProgress:
    """Progress of a job kept in Redis (shared by the client and every worker)."""

    def __init__(self, redis: Any, job_id: str) -> None:
        self.redis = redis
        self.job_id = job_id

    def key(self, stage: str) -> str:
        return f"mathsearch:job:{self.job_id}:{stage}"

    def mark(self, stage: str, batch: str, entry: dict[str, Any]) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}")
        pipe = self.redis.pipeline()
        pipe.hset(self.key(stage), batch, json.dumps(entry))
        pipe.expire(self.key(stage), KEY_TTL_S)
        pipe.execute()

    def snapshot(self) -> Snapshot:
        pipe = self.redis.pipeline()
        for stage in STAGES:
            pipe.hgetall(self.key(stage))
        raw = pipe.execute()
        entries = {
            stage: {_text(k): json.loads(v) for k, v in values.items()}
            for stage, values in zip(STAGES, raw, strict=True)
        }
        return summarise(entries)

    def delete(self) -> None:
        self.redis.delete(*(self.key(stage) for stage in STAGES))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
