"""Equation records and failure records: the data that flows from extraction to indexing.

Every stage (extract, convert, graph, tokens, render, prefix) either returns its output or a
:class:`Failure` with the stage and a short reason code; nothing raises out of a batch
(docs/architecture.md, rule 3 "errors are data").
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")

#: Stages a failure can come from, in pipeline order.
STAGES = ("extract", "convert", "graph", "tokens", "render", "prefix")


#: Longest equation id in UTF-8 bytes; OpenSearch refuses ids over 512 bytes, and one such
#: action fails the validation of its whole bulk request (every item of the batch).
MAX_ID_BYTES = 256


def storable_id(eq_id: str, limit: int = MAX_ID_BYTES) -> str:
    """``eq_id`` when it is non-empty and at most ``limit`` UTF-8 bytes; otherwise its first
    characters, ``~`` and 16 hex digits of its SHA-256 (deterministic, so still idempotent).

    >>> storable_id("doc#1")
    'doc#1'
    >>> storable_id("x" * 300)[-17:], len(storable_id("x" * 300).encode())
    ('~0d4e2ca9e9cbced7', 256)
    """
    encoded = eq_id.encode("utf-8", "surrogatepass")
    if eq_id and len(encoded) <= limit:
        return eq_id
    digest = hashlib.sha256(encoded).hexdigest()[:16]
    head = encoded[: max(0, limit - 17)].decode("utf-8", "ignore")
    return f"{head}~{digest}"


def make_eq_id(doc_id: str, position: int | str) -> str:
    """The idempotent equation id of ``(document id, position)`` (docs/architecture.md, rule 4),
    made :func:`storable_id` (a document id of hundreds of characters is shortened with a hash).

    >>> make_eq_id("hep-th0301001", 3)
    'hep-th0301001#3'
    """
    return storable_id(f"{doc_id}#{position}")


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


def scrub_surrogates(value: Any, depth: int = 32) -> Any:
    """``value`` with every lone surrogate (in strings, also inside dicts and lists, ``depth``
    levels down) replaced by U+FFFD, so that it can be encoded as UTF-8. JSON ``\\ud800``
    escapes and Python strings can hold them; valid UTF-8 cannot, nor can an OpenSearch request.

    >>> scrub_surrogates({"latex": "x\\ud800", "n": [1, "\\udfff"]})
    {'latex': 'x\ufffd', 'n': [1, '\ufffd']}
    """
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value
    if depth <= 0:
        return value
    if isinstance(value, dict):
        return {scrub_surrogates(k, 0): scrub_surrogates(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_surrogates(item, depth - 1) for item in value]
    return value
