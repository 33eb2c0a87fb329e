"""Reader of the hep-th record format (``LATEX->YEAR/PAPERID.tex``, records spanning lines).

A first version for the demo; the full extractor (issue 3) grows from here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources

logger = logging.getLogger(__name__)

_RECORD_END = re.compile(r"^(?P<latex>.*)->(?P<source>(?:[A-Z]+/)?\d{4}/\S+?\.tex)\s*$")
_ENVIRONMENT = re.compile(
    r"^\s*\\begin\{(?P<env>[a-zA-Z]+\*?)\}(?P<body>.*)\\end\{(?P=env)\}\s*$", re.DOTALL
)
_DEFINITION = re.compile(r"\\(?:newcommand|renewcommand|def|providecommand)\b|#\d")


@dataclass(frozen=True)
class HepthRecord:
    """One record: the paper it came from, its position in that paper, the raw LaTeX."""

    doc_id: str
    position: int
    raw: str

    @property
    def eq_id(self) -> str:
        return f"{self.doc_id}#{self.position}"


@dataclass(frozen=True)
class Rejected:
    """A record that is not an equation, with the reason."""

    record: HepthRecord
    reason: str


def bundled_sample_lines() -> list[str]:
    """Lines of ``indexer/resources/hepth2003-sample.txt``, the corpus the demo indexes."""
    sample = resources.files("indexer").joinpath("resources/hepth2003-sample.txt")
    return sample.read_text("utf-8").splitlines(keepends=True)


def read_records(lines: Iterable[str]) -> Iterator[HepthRecord]:
    """Group lines into records; ``position`` counts records within each paper from 0."""
    buffer: list[str] = []
    positions: dict[str, int] = {}
    for line in lines:
        match = _RECORD_END.match(line.rstrip("\n"))
        if match is None:
            buffer.append(line)
            continue
        buffer.append(match.group("latex"))
        source = match.group("source")
        doc_id = source.rsplit("/", 1)[-1].removesuffix(".tex")
        position = positions.get(doc_id, 0)
        positions[doc_id] = position + 1
        yield HepthRecord(doc_id=doc_id, position=position, raw="".join(buffer))
        buffer = []
    if "".join(buffer).strip():
        logger.warning("ignoring %d trailing line(s) without a source marker", len(buffer))


def equation_body(record: HepthRecord) -> str | Rejected:
    """The LaTeX inside the environment, or :class:`Rejected` for macro fragments and junk."""
    match = _ENVIRONMENT.match(record.raw)
    if match is None:
        return Rejected(record, "not a complete \\begin{..}..\\end{..} environment")
    body = match.group("body")
    if _DEFINITION.search(body):
        return Rejected(record, "macro-definition fragment, not an equation")
    body = re.sub(r"\\label\{[^}]*\}", "", body)
    body = re.sub(r"(?<!\\)%.*", "", body).strip()
    if not body:
        return Rejected(record, "empty environment")
    return body
