"""Approach Zero (``pya0``) as the peer of the indexing benchmark.

:func:`index_with_pya0` indexes ``(eq_id, latex)`` pairs with Approach Zero into a fresh index
``WORKDIR/pya0-index`` and returns a :class:`Pya0Result` (equations/s, size on disk, whether a
probe query finds its equation). The indexing runs in a child process (``python -m
mathsearch.evaluation.pya0_peer IN.jsonl WORKDIR OUT.json``): a crash of the C extension cannot take
the
caller down, and the caller's memory does not distort the measurement. The clock runs in the
child from ``index_open`` to ``index_close`` (writer closed, index searchable on disk).

pya0 0.3.7 stores every document, even when its LaTeX does not parse: ``writer_add_doc`` returns
a doc id and writes ``Parser error: ...`` to stderr, but indexes no formula. ``rejected`` counts
the equations that ``pya0.parse`` (the same parser) refuses; it is computed before the clock
starts. Newlines inside ``[imath]`` silently lose the formula, so whitespace is flattened first.

Example::

    result = index_with_pya0([("0301004-0", "x^2+y^2=z^2")], "/tmp/peer")
    logger.info("pya0: %.1f eq/s, searchable=%s", result.eq_per_s, result.searchable)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mathsearch.core.paths import SOURCE_ROOT

logger = logging.getLogger(__name__)

INDEX_DIR = "pya0-index"
INSTALL_HINT = "install it with `pip install pya0==0.3.7` (it is in the `bench` extra)"
EXIT_NO_PYA0 = 3  # exit status of a child that cannot import pya0
_STDERR_TAIL = 20
_PROBE_TOPK = 50


class Pya0Unavailable(RuntimeError):  # noqa: N818 - named like KatexUnavailable
    """pya0 (Approach Zero) cannot be imported."""


class Pya0Error(RuntimeError):
    """The pya0 child process failed (crash, error, missing or bad result)."""


@dataclass
class Pya0Result:
    """Outcome of one pya0 indexing run; ``seconds`` covers index_open .. index_close.

    ``index_bytes`` sums the file sizes (like OpenSearch's store size); Approach Zero keeps one
    small file per formula path, so ``allocated_bytes`` (blocks of files and folders) is larger.
    """

    equations: int
    indexed: int
    rejected: int
    seconds: float
    eq_per_s: float
    index_bytes: int
    searchable: bool
    index_files: int = 0
    allocated_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pya0_importable() -> bool:
    return importlib.util.find_spec("pya0") is not None


def _tex(latex: str) -> str:
    return " ".join(latex.split())


def index_with_pya0(
    equations: Sequence[tuple[str, str]], workdir: str | Path, *, maintain_every: int = 0
) -> Pya0Result:
    """Index ``(eq_id, latex)`` pairs with pya0 in a child process into ``workdir/pya0-index``.

    ``maintain_every`` > 0 calls ``writer_maintain(writer, force=False)`` after every that many
    documents; every run ends with ``writer_maintain(writer, force=True)`` and a flush.
    """
    if maintain_every < 0:
        raise ValueError(f"maintain_every must be >= 0, got {maintain_every}")
    if not _pya0_importable():
        raise Pya0Unavailable(f"pya0 is not importable; {INSTALL_HINT}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    root = str(SOURCE_ROOT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="pya0-peer-") as tmp:
        source, target = Path(tmp, "equations.jsonl"), Path(tmp, "result.json")
        with source.open("w", encoding="utf-8") as fh:
            for eq_id, latex in equations:
                fh.write(json.dumps({"id": eq_id, "latex": latex}) + "\n")
        command = [
            sys.executable,
            "-m",
            "mathsearch.evaluation.pya0_peer",
            str(source),
            str(workdir),
        ]
        command += [str(target), "--maintain-every", str(maintain_every)]
        logger.info("pya0 peer: indexing %d equations under %s", len(equations), workdir)
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        tail = "\n".join(done.stderr.strip().splitlines()[-_STDERR_TAIL:])
        if done.returncode == EXIT_NO_PYA0:
            raise Pya0Unavailable(f"pya0 is not importable in the child; {INSTALL_HINT}\n{tail}")
        if done.returncode != 0:
            raise Pya0Error(f"pya0 child exited with {done.returncode}; stderr ends:\n{tail}")
        try:
            result = Pya0Result(**json.loads(target.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError) as exc:
            raise Pya0Error(f"pya0 child wrote no usable result ({exc}); stderr:\n{tail}") from exc
    logger.info("pya0 peer: %s", result.to_dict())
    return result


def _probe(pya0: Any, index_dir: Path, accepted: list[tuple[str, str]]) -> bool:
    """Open the index read-only and query one accepted equation; True when it finds itself."""
    if not accepted:
        return False
    eq_id, tex = next(((i, t) for i, t in accepted if len(t) >= 8), accepted[0])
    same = {i for i, t in accepted if t == tex}
    index = pya0.index_open(str(index_dir), option="r")
    if index is None:
        return False
    try:
        answer = json.loads(pya0.search(index, [{"str": tex, "type": "tex"}], topk=_PROBE_TOPK))
    finally:
        pya0.index_close(index)
    hits = answer.get("hits", []) if answer.get("ret_code") == 0 else []
    found = any(hit.get("field_url") in same for hit in hits)
    logger.info("probe %s (%s): %d hits, found=%s", eq_id, tex, len(hits), found)
    return found


def _index(pya0: Any, records: list[tuple[str, str]], workdir: Path, every: int) -> Pya0Result:
    index_dir = workdir / INDEX_DIR
    if index_dir.exists():
        shutil.rmtree(index_dir)
    docs = [(eq_id, _tex(latex)) for eq_id, latex in records]
    accepted = [(i, t) for i, t in docs if pya0.parse(t)[0] == "OK"]  # before the clock
    start = time.perf_counter()
    index = pya0.index_open(str(index_dir), option="w")
    if index is None:
        raise Pya0Error(f"pya0 could not create an index at {index_dir}")
    writer = pya0.index_writer(index)
    for n, (eq_id, tex) in enumerate(docs, 1):
        pya0.writer_add_doc(writer, content=f"[imath]{tex}[/imath]", url=eq_id)
        if every and n % every == 0:
            pya0.writer_maintain(writer, force=False)
    pya0.writer_maintain(writer, force=True)
    pya0.writer_flush(writer)
    pya0.writer_close(writer)
    pya0.index_close(index)
    seconds = time.perf_counter() - start
    stats = [(p.is_file(), p.stat()) for p in index_dir.rglob("*")]
    return Pya0Result(
        equations=len(docs),
        indexed=len(accepted),
        rejected=len(docs) - len(accepted),
        seconds=seconds,
        eq_per_s=len(docs) / seconds if seconds > 0 else 0.0,
        index_bytes=sum(st.st_size for is_file, st in stats if is_file),
        searchable=_probe(pya0, index_dir, accepted),
        index_files=sum(is_file for is_file, _ in stats),
        allocated_bytes=sum(st.st_blocks * 512 for _, st in stats),
    )


def child_start(source: Path) -> tuple[Any, list[dict[str, Any]]]:
    """What a pya0 child does first: log to stderr, import pya0 (``None`` when it cannot; the
    child then exits with :data:`EXIT_NO_PYA0`) and read its JSON Lines input."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        import pya0
    except ImportError as exc:
        logger.error("cannot import pya0 (%s); %s", exc, INSTALL_HINT)
        return None, []
    with source.open(encoding="utf-8") as fh:
        return pya0, [json.loads(line) for line in fh if line.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """Child entry point: ``python -m mathsearch.evaluation.pya0_peer IN.jsonl WORKDIR
    OUT.json``."""
    parser = argparse.ArgumentParser(
        prog="python -m mathsearch.evaluation.pya0_peer",
        description="Index equations with pya0, time it.",
    )
    parser.add_argument("source", type=Path, help="JSONL, one {'id', 'latex'} object a line")
    parser.add_argument("workdir", type=Path, help="the index goes to WORKDIR/pya0-index")
    parser.add_argument("target", type=Path, help="where the result JSON is written")
    parser.add_argument("--maintain-every", type=int, default=0)
    args = parser.parse_args(argv)
    pya0, rows = child_start(args.source)
    if pya0 is None:
        return EXIT_NO_PYA0
    records = [(str(row["id"]), str(row["latex"])) for row in rows]
    args.workdir.mkdir(parents=True, exist_ok=True)
    result = _index(pya0, records, args.workdir, args.maintain_every)
    args.target.write_text(json.dumps(result.to_dict()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
