"""The parse stage for workers: records in, parsed equations or failure records out (JSON).

A plain function (runs without a broker) that the Celery task ``mathsearch.parse.records``
wraps. The :class:`~indexer.parse.Featuriser` (vocabulary, converter) is built once per worker
process and reused by every task that process runs.
"""

from __future__ import annotations

import logging
from typing import Any

from indexer.parse import Featuriser
from indexer.records import EquationRecord, Failure

logger = logging.getLogger(__name__)

_FEATURISER: list[Featuriser] = []


def featuriser() -> Featuriser:
    """This process's featuriser (created on first use)."""
    if not _FEATURISER:
        _FEATURISER.append(Featuriser())
        logger.info("featuriser ready (vocabulary %s)", _FEATURISER[0].vocabulary.content_hash[:12])
    return _FEATURISER[0]


def parse_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Featurise JSON equation records; one JSON result per record, in order.

    A record that is not even a valid equation record becomes a failure record (stage
    ``extract``, reason ``bad-record``); nothing raises for bad input.
    """
    items: list[EquationRecord | Failure] = []
    for number, data in enumerate(records):
        try:
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
    return [item.to_dict() for item in featuriser().parse_stream(items)]
