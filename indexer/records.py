"""Equation records and failure records: the data that flows from extraction to indexing.

Every stage (extract, convert, graph, tokens, render, prefix) either returns its output or a
:class:`Failure` with the stage and a short reason code; nothing raises out of a batch
(DESIGN.md, rule 3 "errors are data").
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

#: Stages a failure can come from, in pipeline order.
STAGES = ("extract", "convert", "graph", "tokens", "render", "prefix")


def make_eq_id(doc_id: str, position: int | str) -> str:
    """The idempotent equation id of ``(document id, position)`` (DESIGN.md rule 4).

    >>> make_eq_id("hep-th0301001", 3)
    'hep-th0301001#3'
    """
    return f"{doc_id}#{position}"


def content_id(text: str) -> str:
    """A content-derived id (16 hex digits of SHA-256) for equations without a document."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class EquationRecord:
    """One extracted equation.

    ``position`` counts equations within the document from 0 (after splitting aligned rows);
    exactly one of ``latex`` and ``mathml`` is usually set (JATS may carry both).
    ``section`` is the title of the enclosing section ("" when unknown), ``context`` a window
    of the text around the equation.
    """

    eq_id: str
    doc_id: str
    position: int
    latex: str | None = None
    mathml: str | None = None
    section: str = ""
    context: str = ""
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not data["extra"]:
            del data["extra"]
        return {key: value for key, value in data.items() if value is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EquationRecord:
        known = {name for name in cls.__dataclass_fields__}
        kwargs = {key: value for key, value in data.items() if key in known}
        extra = {key: value for key, value in data.items() if key not in known}
        if extra:
            kwargs["extra"] = {**kwargs.get("extra", {}), **extra}
        return cls(**kwargs)


@dataclass
class Failure:
    """Why one equation (or one input) did not make it through a stage.

    ``reason`` is a short stable code (e.g. ``unknown-macro``, ``unbalanced-braces``,
    ``too-large``) that reports group by; ``detail`` is the human-readable message.
    """

    eq_id: str
    doc_id: str
    stage: str
    reason: str
    detail: str = ""
    source: str = ""
    excerpt: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["failure"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Failure:
        known = {name for name in cls.__dataclass_fields__}
        return cls(**{key: value for key, value in data.items() if key in known})


def excerpt(text: str | None, limit: int = 120) -> str:
    """The first ``limit`` characters of ``text`` on one line, for failure records."""
    if not text:
        return ""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
