"""The parse stage for workers: records in, parsed equations or failure records out (JSON).

A plain function (runs without a broker) that the Celery task ``mathsearch.parse.records``
wraps. The :class:`~mathsearch.indexer.parse.Featuriser` (vocabulary, converter) is built once per
worker
process and reused by every task that process runs; a second one with SymPy prefix tokens
(``with_prefix``, for jobs with a ``seq2seq`` encoder) is built on first use of such a job.
"""

from __future__ import annotations

import logging
from typing import Any

from mathsearch.indexer.parse import Featuriser
from mathsearch.indexer.records import EquationRecord, Failure

logger = logging.getLogger(__name__)

_FEATURISERS: dict[bool, Featuriser] = {}


def featuriser(with_prefix: bool = False) -> Featuriser:
    """This process's featuriser (created on first use); ``with_prefix`` adds SymPy prefix
    tokens (``prefix`` / ``prefix_error`` of each parsed equation)."""
    if with_prefix not in _FEATURISERS:
        made = Featuriser(with_prefix=with_prefix)
        _FEATURISERS[with_prefix] = made
        logger.info(
            "featuriser ready (vocabulary %s, prefix %s)",
            made.vocabulary.content_hash[:12],
            with_prefix,
        )
    return _FEATURISERS[with_prefix]


#: The types a JSON equation record's fields may have (``None`` allowed where listed).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "eq_id": (str, int),
    "doc_id": (str, int),
    "position": (int,),
    "latex": (str, type(None)),
    "mathml": (str, type(None)),
    "section": (str, type(None)),
    "context": (str, type(None)),
    "source": (str, type(None)),
    "extra": (dict, type(None)),
}


def check_record(data: Any) -> None:
    """Raise ``TypeError`` unless ``data`` is a dict whose known fields have usable types (a
    record from any client: a ``position`` of ``"x"`` must not fail the write of its batch).
    """
    if not isinstance(data, dict):
        raise TypeError(f"a record is a JSON object, not {type(data).__name__}")
    if "eq_id" not in data:
        raise TypeError("a record needs an eq_id")
    for key, types in _FIELD_TYPES.items():
        value = data.get(key)
        if key in data and (not isinstance(value, types) or isinstance(value, bool)):
            raise TypeError(f"{key!r} may not be a {type(value).__name__}")
    position = data.get("position", 0)
    if not 0 <= position < 2**31:
        raise TypeError(f"position {position} is outside 0 .. 2**31-1")


def parse_records(records: list[dict[str, Any]], with_prefix: bool = False) -> list[dict[str, Any]]:
    """Featurise JSON equation records; one JSON result per record, in order (with SymPy
    prefix tokens when ``with_prefix``).

    A record that is not even a valid equation record becomes a failure record (stage
    ``extract``, reason ``bad-record``); nothing raises for bad input.
    """
    items: list[EquationRecord | Failure] = []
    for number, data in enumerate(records):
        try:
            check_record(data)
            items.append(EquationRecord.from_dict(data))
        except (TypeError, AttributeError) as exc:
            eq_id = data.get("eq_id", f"#{number}") if isinstance(data, dict) else f"#{number}"
            items.append(
                Failure(
                    eq_id=str(eq_id),
                    doc_id="",
                    stage="extract",
                    reason="bad-record",
                    detail=str(exc)[:300],
                )
            )
    return [item.to_dict() for item in featuriser(with_prefix).parse_stream(items)]
