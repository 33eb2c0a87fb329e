"""Approach Zero (``pya0``) searches an index of :mod:`mathsearch.evaluation.pya0_peer` in a child
process.

:func:`search_with_pya0` asks every topic's LaTeX of the index ``WORKDIR/pya0-index`` built by
:func:`mathsearch.evaluation.pya0_peer.index_with_pya0` and returns a TREC-style run (``qid ->
[(eq_id,
score), ...]``, best first, the topic's excluded ids dropped, at most ``k`` a topic). Topics
whose LaTeX pya0's own parser (``pya0.parse``) refuses are listed in ``unparsed``; pya0 finds
nothing for them ("No hit found" is an empty ranking, not an error).

The searches run in a child process (``python -m mathsearch.evaluation.pya0_search INDEX_DIR
IN.jsonl
OUT.jsonl --k K``) that writes one JSON line per topic as soon as it is answered. A crash of the
C extension (or a query that answers nothing for ``query_timeout`` seconds) costs only the topic
being searched: the parent records it as failed and starts a new child on the remaining topics,
up to ``max_crashes`` times. A query that pya0 answers with an error (``ret_code`` != 0, e.g. LaTeX
its parser refuses) is a failed topic with an empty ranking; neither ever aborts the run.

Example::

    index_with_pya0([(e.eq_id, e.latex) for e in collection], "/tmp/pya0")
    found = search_with_pya0("/tmp/pya0", [Topic("q1", "x^2 + y^2", exclude=("q1",))], k=100)
    found.run["q1"][:3], found.failures
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mathsearch.core.paths import SOURCE_ROOT
from mathsearch.evaluation.pya0_peer import (
    EXIT_NO_PYA0,
    INDEX_DIR,
    INSTALL_HINT,
    Pya0Error,
    Pya0Unavailable,
    child_start,
)
from mathsearch.evaluation.trec_files import Run, Topic

logger = logging.getLogger(__name__)

_EXIT_NO_INDEX = 2  # also argparse's: neither improves on a retry
_TAIL = 20
_NO_HIT = 2  # pya0's ret_code for an empty result (also for a query its parser refuses)
_POLL = 0.1


@dataclass
class Pya0Search:
    """A run, the failed topics (``qid -> reason``), the child's search time, the crashes.

    ``unparsed`` lists the topics whose LaTeX pya0's parser refuses (they find nothing);
    ``failures`` the topics pya0 answered with an error, crashed or hung on.
    """

    run: Run
    failures: dict[str, str] = field(default_factory=dict)
    unparsed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    crashes: int = 0

    @property
    def queries_per_s(self) -> float:
        return len(self.run) / self.seconds if self.seconds > 0 else 0.0


def _tex(latex: str) -> str:
    return " ".join(latex.split())


def search_with_pya0(
    workdir: str | Path,
    topics: Sequence[Topic],
    *,
    k: int = 100,
    query_timeout: float = 60.0,
    max_crashes: int = 20,
    progress: Callable[[int], Any] | None = None,
) -> Pya0Search:
    """Search ``topics`` in ``workdir/pya0-index`` in child processes; see the module docstring.

    ``progress`` is called with the number of topics answered since its last call.

    Raises:
        Pya0Unavailable: pya0 cannot be imported.
        Pya0Error: no index in ``workdir``, or more than ``max_crashes`` crashes.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    index_dir = Path(workdir) / INDEX_DIR
    if not index_dir.is_dir():
        raise Pya0Error(f"no pya0 index at {index_dir}: index the collection first")
    result = Pya0Search(run={})
    pending = list(topics)
    with tempfile.TemporaryDirectory(prefix="pya0-search-") as tmp:
        while pending:
            answered, seconds, crash = _child(
                index_dir, pending, k=k, query_timeout=query_timeout, tmp=Path(tmp),
                progress=progress,
            )  # fmt: skip
            result.seconds += seconds
            for row in answered:
                qid = str(row["qid"])
                result.run[qid] = [(str(url), float(score)) for url, score in row["hits"]]
                if row.get("error"):
                    result.failures[qid] = str(row["error"])
                if row.get("parsed") is False:
                    result.unparsed.append(qid)
            pending = pending[len(answered) :]
            if crash is None or not pending:
                break
            result.crashes += 1
            if result.crashes > max_crashes:
                raise Pya0Error(f"the pya0 child crashed {result.crashes} times; last: {crash}")
            lost, pending = pending[0], pending[1:]
            result.run[lost.qid] = []
            result.failures[lost.qid] = crash
            if progress is not None:
                progress(1)
            logger.warning("pya0 crashed on topic %s (%s); continuing", lost.qid, crash)
    if result.failures:
        logger.warning("pya0: %d of %d topics failed", len(result.failures), len(topics))
    return result


def _child(
    index_dir: Path,
    topics: Sequence[Topic],
    *,
    k: int,
    query_timeout: float,
    tmp: Path,
    progress: Callable[[int], Any] | None,
) -> tuple[list[dict[str, Any]], float, str | None]:
    """One child over ``topics``: its answered rows, its search seconds, why it died (or None).

    The parent watches the answers file: ``progress`` gets each newly answered count, and a
    child that answers nothing for ``query_timeout`` seconds is killed.
    """
    source, target, errors = tmp / "topics.jsonl", tmp / "answers.jsonl", tmp / "stderr.txt"
    with source.open("w", encoding="utf-8") as fh:
        for topic in topics:
            row = {"qid": topic.qid, "latex": topic.latex, "exclude": list(topic.exclude)}
            fh.write(json.dumps(row) + "\n")
    target.write_text("", encoding="utf-8")
    root = str(SOURCE_ROOT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    command = [
        sys.executable,
        "-m",
        "mathsearch.evaluation.pya0_search",
        str(index_dir),
        str(source),
    ]
    command += [str(target), "--k", str(k)]
    crash: str | None = None
    with errors.open("w", encoding="utf-8") as err, target.open("rb") as answers:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env)
        answered, moved = 0, time.monotonic()
        while True:
            finished = child.poll() is not None
            new = answers.read().count(b"\n")
            if new:
                answered, moved = answered + new, time.monotonic()
                if progress is not None:
                    progress(new)
            if finished:
                break
            if time.monotonic() - moved > query_timeout:
                child.kill()
                child.wait()
                crash = f"pya0 answered nothing for {query_timeout:.0f} s (killed)"
                break
            time.sleep(_POLL)
    tail = "\n".join(errors.read_text(encoding="utf-8", errors="replace").splitlines()[-_TAIL:])
    if child.returncode == EXIT_NO_PYA0:
        raise Pya0Unavailable(f"pya0 is not importable in the child; {INSTALL_HINT}\n{tail}")
    if child.returncode == _EXIT_NO_INDEX:
        raise Pya0Error(f"the pya0 child cannot open {index_dir}:\n{tail}")
    if crash is None and child.returncode != 0:
        crash = f"pya0 child exited with {child.returncode}: {tail[-300:]}"
    rows: list[dict[str, Any]] = []
    for line in target.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # the line being written when the child died
            break
    if crash is None and len(rows) < len(topics):
        crash = f"pya0 child answered {len(rows)} of {len(topics)} topics"
    seconds = sum(float(row.get("seconds", 0.0)) for row in rows)
    return rows, seconds, crash


def _search_one(pya0: Any, index: Any, row: dict[str, Any], k: int) -> dict[str, Any]:
    exclude = set(row.get("exclude") or [])
    tex = _tex(row["latex"])
    parsed = pya0.parse(tex)[0] == "OK"
    started = time.perf_counter()
    try:
        answer = json.loads(
            pya0.search(index, [{"str": tex, "type": "tex"}], topk=k + len(exclude))
        )
    except (ValueError, UnicodeDecodeError) as exc:  # pya0 returned unreadable JSON
        answer = {"ret_code": -1, "ret_str": f"unreadable answer: {exc}"}
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {"qid": row["qid"], "hits": [], "seconds": seconds, "parsed": parsed}
    code = answer.get("ret_code")
    if code == _NO_HIT:
        return out
    if code != 0:
        out["error"] = f"pya0 ret_code {code}: {answer.get('ret_str')}"
        return out
    hits = [
        [hit["field_url"], float(hit["score"])]
        for hit in answer.get("hits", [])
        if hit.get("field_url") not in exclude
    ]
    out["hits"] = hits[:k]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Child entry point: ``python -m mathsearch.evaluation.pya0_search INDEX_DIR IN.jsonl
    OUT.jsonl``."""
    parser = argparse.ArgumentParser(
        prog="python -m mathsearch.evaluation.pya0_search",
        description="Search a pya0 index, one line a topic.",
    )
    parser.add_argument("index_dir", type=Path, help="the pya0 index folder")
    parser.add_argument("source", type=Path, help="JSONL, one {'qid', 'latex', 'exclude'} a line")
    parser.add_argument("target", type=Path, help="JSONL answers, one {'qid', 'hits'} a line")
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args(argv)
    pya0, rows = child_start(args.source)
    if pya0 is None:
        return EXIT_NO_PYA0
    index = pya0.index_open(str(args.index_dir), option="r")
    if index is None:
        logger.error("pya0 cannot open the index at %s", args.index_dir)
        return _EXIT_NO_INDEX
    try:
        with args.target.open("w", encoding="utf-8") as out:
            for row in rows:
                out.write(json.dumps(_search_one(pya0, index, row, args.k)) + "\n")
                out.flush()  # what was answered survives a crash on the next query
    finally:
        pya0.index_close(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
