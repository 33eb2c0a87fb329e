"""Bulk actions for equations and failure records: deterministic ids, re-runs that change nothing.

An equation is written as an ``update`` with ``upsert``: the first write inserts the whole document
(with ``indexed_at``), a later write of the same content merges identical values and OpenSearch
answers ``noop`` - version, sequence number and source stay as they were, so running the same job
twice leaves the index identical. The id is the equation id (document id and position,
docs/architecture.md, rule 4). New vectors of another model version are partial updates of their own
field (and of ``model_versions``), which leave every other field alone.

A failure record's id is the equation id too, so each failed equation is in the failures index
exactly once, with the stage and reason of its last failure.

Example::

    actions = equation_actions("mathsearch-equations", [parsed.to_dict()], {"vec_gcn_v1": vecs})
    BulkWriter(client).write(actions)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from mathsearch.indexer.records import Failure


def now_iso() -> str:
    """The current UTC time, ISO 8601 with milliseconds (the ``date`` fields' format)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def flat_symbols(symbols: Mapping[str, Sequence[str]] | Sequence[str] | None) -> list[str]:
    """The ``symbols`` keyword values: the featuriser's ``{kind: [symbol]}`` flattened, sorted."""
    if not symbols:
        return []
    if isinstance(symbols, Mapping):
        values = {s for group in symbols.values() for s in group}
    else:
        values = set(symbols)
    return sorted(values)


def keeps_mathml(parsed: Mapping[str, Any]) -> bool:
    """Whether the index stores the equation's MathML: only when it came in as MathML (or
    there is no LaTeX to render it from).

    For LaTeX input the MathML is the converter's rendering of the LaTeX, the largest
    stored field after the tokens (~1.2 kB per hep-th equation); searches that ask for it
    render it again from ``latex`` (:class:`~mathsearch.opensearch.mathml_display.MathMLRenderer`,
    ~0.1 ms per equation, the same string).
    """
    fmt = parsed.get("input_format")
    return fmt == "mathml" or (fmt is None and not parsed.get("latex"))


def equation_source(
    parsed: Mapping[str, Any],
    vectors: Mapping[str, Sequence[float] | str | None] | None = None,
    refusals: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The indexed document of one parsed equation (``ParsedEquation.to_dict()`` form).

    ``vectors`` maps vector fields to this equation's vector (``None``: that encoder refused
    it, the field is left out; a string: an exact-only field's encoded bytes, written as they
    are); ``refusals`` (``"vec_seq2seq_v1:sympy-parse"``, one per refusing
    encoder) become ``embed_refusals`` when given (jobs with several encoders give them, also
    empty, so a re-run that no longer refuses clears them).
    """
    present = {name: vector for name, vector in (vectors or {}).items() if vector is not None}
    source: dict[str, Any] = {
        "eq_id": parsed["eq_id"],
        "doc_id": parsed["doc_id"],
        "position": int(parsed.get("position", 0)),
        "section": parsed.get("section") or "",
        "latex": parsed.get("latex") or "",
        "mathml": (parsed.get("mathml") or "") if keeps_mathml(parsed) else "",
        "math_tokens": " ".join(parsed.get("math_tokens") or []),
        "canon_tokens": " ".join(parsed.get("canonical") or []),
        "symbols": flat_symbols(parsed.get("symbols")),
        "context": parsed.get("context") or "",
        "keywords": list((parsed.get("extra") or {}).get("keywords") or []),
        "source": parsed.get("source") or "",
        "model_versions": sorted(present),
    }
    if refusals is not None:
        source["embed_refusals"] = sorted(refusals)
    for field, vector in present.items():
        # an exact-only field's vector arrives encoded (base64 bytes: stored_vectors)
        source[field] = _written(vector)
    return source


def equation_actions(
    index: str,
    parsed: Iterable[Mapping[str, Any]],
    vectors: Mapping[str, Sequence[Sequence[float] | str | None]] | None = None,
    *,
    refusals: Sequence[Sequence[str]] | None = None,
) -> Iterator[dict[str, Any]]:
    """Upsert actions for ``parsed`` equations; ``vectors[field][i]`` belongs to equation ``i``
    (``None``: refused by that encoder; a string: an exact-only field's encoded bytes, as
    :func:`equation_source` takes them), ``refusals[i]`` are equation ``i``'s refusals.

    The first write inserts the document with ``indexed_at``; re-writing the same content is a
    no-op on the cluster.
    """
    columns = dict(vectors or {})
    for number, item in enumerate(parsed):
        row = {field: values[number] for field, values in columns.items()}
        refused = refusals[number] if refusals is not None else None
        source = equation_source(item, row, refused)
        yield upsert_action(index, source["eq_id"], source, stamp="indexed_at")


def upsert_action(index: str, doc_id: str, source: dict[str, Any], *, stamp: str) -> dict:
    """An update that inserts ``source`` (+ ``stamp``: now) or merges it (no-op if unchanged)."""
    return {
        "_op_type": "update",
        "_index": index,
        "_id": doc_id,
        "doc": source,
        "upsert": {**source, stamp: now_iso()},
        "retry_on_conflict": 3,
    }


_SET_VECTOR = (
    "def versions = ctx._source.model_versions; "
    "if (versions != null && versions.contains(params.field) "
    "&& ctx._source[params.field] == params.vector) { ctx.op = 'noop'; return; } "
    "ctx._source[params.field] = params.vector; "
    "if (versions == null) { versions = []; ctx._source.model_versions = versions; } "
    "if (!versions.contains(params.field)) { versions.add(params.field); versions.sort(null); }"
)


def _written(vector: Sequence[float] | str) -> list[float] | str:
    """A vector as a document holds it: floats, or an exact-only field's encoded text."""
    return vector if isinstance(vector, str) else [float(x) for x in vector]


def vector_update_actions(
    index: str, field: str, ids: Sequence[str], vectors: Sequence[Sequence[float] | str]
) -> Iterator[dict[str, Any]]:
    """Partial updates that add (or refresh) one vector field on existing equations.

    ``model_versions`` gains ``field`` by a parameterised script (a no-op when the stored vector
    is already this one); a document that no longer
    exists is reported as a per-item failure (``document_missing_exception``), not recreated.
    """
    for eq_id, vector in zip(ids, vectors, strict=True):
        yield {
            "_op_type": "update",
            "_index": index,
            "_id": eq_id,
            "script": {
                "lang": "painless",
                "source": _SET_VECTOR,
                "params": {"field": field, "vector": _written(vector)},
            },
            "retry_on_conflict": 3,
        }


def failure_id(target: str | None, eq_id: str) -> str:
    """The failure record's id: one per equation and target index (``<target>/<eq_id>``)."""
    return f"{target}/{eq_id}" if target else eq_id


def failure_actions(
    index: str, failures: Iterable[Failure | Mapping[str, Any]], *, target: str | None = None
) -> Iterator[dict]:
    """Upserts of failure records for equations bound for ``target`` (an index or alias).

    The id is :func:`failure_id` (target + equation id): one record per equation and target,
    so a re-run is a no-op and two corpora that reuse equation ids do not collide.
    """
    for failure in failures:
        item = failure if isinstance(failure, Failure) else Failure.from_dict(dict(failure))
        source = {
            "eq_id": item.eq_id,
            "doc_id": item.doc_id,
            "index": target or "",
            "stage": item.stage,
            "reason": item.reason,
            "detail": item.detail[:2000],
            "source": item.source,
            "excerpt": item.excerpt,
        }
        yield upsert_action(index, failure_id(target, item.eq_id), source, stamp="failed_at")
