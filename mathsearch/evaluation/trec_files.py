"""Evaluation files: topics (JSON Lines), qrels and runs (TREC formats).

* topics: one JSON object a line, ``{"qid", "latex", "text"?, "exclude"?}`` - ``exclude`` lists
  the ids never to rank for the topic (e.g. the query's own equation);
* qrels: ``qid 0 docid rel`` a line (whitespace separated, ``rel`` an integer, > 0 relevant);
* runs: ``qid Q0 docid rank score tag`` a line, best first within a topic.

Malformed lines raise :class:`TrecFileError` naming the file and the line number.

Example::

    write_topics("topics.jsonl", [Topic("q1", r"E = mc^2", exclude=("eq-7",))])
    write_qrels("qrels.txt", {"q1": {"eq-8": 1, "eq-9": 0}})
    write_run("run.txt", {"q1": [("eq-8", 0.93), ("eq-3", 0.41)]}, tag="fusion")
    assert read_run("run.txt")["q1"][0] == ("eq-8", 0.93)
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathsearch.core.errors import TrecFileError

logger = logging.getLogger(__name__)

#: A ranking per topic: ``qid -> [(docid, score), ...]``, best first.
Run = dict[str, list[tuple[str, float]]]

#: Relevance judgments: ``qid -> {docid: grade}`` (grade > 0 is relevant).
Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True)
class Topic:
    """One evaluation query: LaTeX (plus optional words) and the ids never to rank for it."""

    qid: str
    latex: str
    text: str = ""
    exclude: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"qid": self.qid, "latex": self.latex}
        if self.text:
            out["text"] = self.text
        if self.exclude:
            out["exclude"] = list(self.exclude)
        return out


# -- topics ------------------------------------------------------------------------------------


def write_topics(path: str | Path, topics: Iterable[Topic]) -> Path:
    """Write topics as JSON Lines; returns the path."""
    target = _prepare(path)
    with target.open("w", encoding="utf-8") as out:
        for topic in topics:
            out.write(json.dumps(topic.to_dict(), ensure_ascii=False) + "\n")
    return target


def read_topics(path: str | Path) -> list[Topic]:
    """Read a JSON Lines topics file (blank lines skipped; duplicate qids refused)."""
    topics: list[Topic] = []
    seen: set[str] = set()
    for number, line in _lines(path):
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrecFileError(f"{path}:{number}: not JSON: {exc.msg}") from exc
        topic = _topic(data, f"{path}:{number}")
        if topic.qid in seen:
            raise TrecFileError(f"{path}:{number}: duplicate topic {topic.qid!r}")
        seen.add(topic.qid)
        topics.append(topic)
    return topics


def _topic(data: Any, where: str) -> Topic:
    if not isinstance(data, dict):
        raise TrecFileError(f"{where}: a topic is a JSON object")
    unknown = sorted(set(data) - {"qid", "latex", "text", "exclude"})
    if unknown:
        raise TrecFileError(f"{where}: unknown topic keys: {', '.join(unknown)}")
    qid, latex = data.get("qid"), data.get("latex")
    if not isinstance(qid, (str, int)) or isinstance(qid, bool) or not str(qid).strip():
        raise TrecFileError(f"{where}: a topic needs a non-empty 'qid'")
    if not isinstance(latex, str):
        raise TrecFileError(f"{where}: topic {qid!r} needs a 'latex' string")
    text = data.get("text", "")
    if not isinstance(text, str):
        raise TrecFileError(f"{where}: 'text' of topic {qid!r} must be a string")
    if not latex.strip() and not text.strip():
        raise TrecFileError(f"{where}: topic {qid!r} has neither LaTeX nor words")
    exclude = data.get("exclude", [])
    if not isinstance(exclude, list) or not all(isinstance(x, str) for x in exclude):
        raise TrecFileError(f"{where}: 'exclude' of topic {qid!r} must be a list of ids")
    if any(char.isspace() for char in str(qid)):
        raise TrecFileError(f"{where}: topic id {qid!r} contains whitespace")
    return Topic(qid=str(qid), latex=latex, text=text, exclude=tuple(exclude))


# -- qrels -------------------------------------------------------------------------------------


def write_qrels(path: str | Path, qrels: Qrels) -> Path:
    """Write qrels in TREC format ``qid 0 docid rel``; returns the path."""
    target = _prepare(path)
    with target.open("w", encoding="utf-8") as out:
        for qid, judged in qrels.items():
            for docid, rel in judged.items():
                _check_id(qid, "topic")
                _check_id(docid, "document")
                out.write(f"{qid} 0 {docid} {int(rel)}\n")
    return target


def read_qrels(path: str | Path) -> Qrels:
    """Read TREC qrels; a repeated ``(qid, docid)`` keeps the last grade."""
    qrels: Qrels = {}
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) != 4:
            raise TrecFileError(
                f"{path}:{number}: a qrels line is 'qid 0 docid rel', got {len(parts)} fields"
            )
        qid, _, docid, rel = parts
        try:
            grade = int(rel)
        except ValueError as exc:
            raise TrecFileError(f"{path}:{number}: relevance {rel!r} is not an integer") from exc
        qrels.setdefault(qid, {})[docid] = grade
    return qrels


# -- runs --------------------------------------------------------------------------------------


def write_run(path: str | Path, run: Run, tag: str) -> Path:
    """Write a run in TREC format ``qid Q0 docid rank score tag`` (ranks from 1); returns it."""
    _check_id(tag, "run tag")
    target = _prepare(path)
    with target.open("w", encoding="utf-8") as out:
        for qid, ranking in run.items():
            _check_id(qid, "topic")
            for rank, (docid, score) in enumerate(ranking, start=1):
                _check_id(docid, "document")
                out.write(f"{qid} Q0 {docid} {rank} {float(score):.6g} {tag}\n")
    return target


def read_run(path: str | Path) -> Run:
    """Read a TREC run; each topic's ranking is ordered by rank (ties by file order)."""
    ranked: dict[str, list[tuple[int, int, str, float]]] = {}
    for number, line in _lines(path):
        parts = line.split()
        if len(parts) != 6:
            raise TrecFileError(
                f"{path}:{number}: a run line is 'qid Q0 docid rank score tag', "
                f"got {len(parts)} fields"
            )
        qid, _, docid, rank, score, _tag = parts
        try:
            position, value = int(rank), float(score)
        except ValueError as exc:
            raise TrecFileError(f"{path}:{number}: bad rank {rank!r} or score {score!r}") from exc
        if not math.isfinite(value):
            raise TrecFileError(f"{path}:{number}: score {score!r} is not finite")
        ranked.setdefault(qid, []).append((position, number, docid, value))
    return {
        qid: [(docid, value) for _, _, docid, value in sorted(rows)] for qid, rows in ranked.items()
    }


# -- helpers -----------------------------------------------------------------------------------


def _prepare(path: str | Path) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TrecFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise TrecFileError(f"{path} is not UTF-8 text: {exc}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


def _check_id(value: str, what: str) -> None:
    if not value or any(char.isspace() for char in value):
        raise TrecFileError(f"{what} id {value!r} is empty or contains whitespace")
