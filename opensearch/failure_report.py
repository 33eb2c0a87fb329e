"""What failed for an equation index: the failure records counted by stage and reason, and listed.

Every equation that did not make it into an equation index has one record in the failures
index (``<prefix>-failures``), with the index it was bound for (``index``), its stage
(``extract``, the featuriser's ``convert``, ``graph``, ``tokens``, ..., then ``embed``,
``write``, ``enrich``), a stable reason code and the detail.
:func:`failure_summary` answers "what failed, and why" for one equation index
(``mathsearch failures``): the counts by stage and reason of every record that matches the
filters, and the most recent ``limit`` of them.

Example::

    summary = failure_summary(client, "mathsearch-failures", "mathsearch-equations",
                              reason="unbalanced-braces", limit=5)
    summary.total, summary.by_stage, [r["eq_id"] for r in summary.records]
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError

logger = logging.getLogger(__name__)

#: fields of a listed record
RECORD_FIELDS = ["eq_id", "doc_id", "stage", "reason", "detail", "source", "excerpt", "failed_at"]


@dataclass
class FailureSummary:
    """The failure records of one equation index that match a filter."""

    index: str
    total: int = 0
    #: ``{stage: {reason: count}}``
    by_stage: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the most recent records first (``RECORD_FIELDS``)
    records: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "total": self.total,
            "by_stage": self.by_stage,
            "records": self.records,
        }


def failure_query(
    index: str, *, stage: str | None = None, reason: str | None = None, doc_id: str | None = None
) -> dict[str, Any]:
    """The query for the records of ``index`` with the given stage, reason and document.

    >>> failure_query("eq", reason="too-large")
    {'bool': {'filter': [{'term': {'index': 'eq'}}, {'term': {'reason': 'too-large'}}]}}
    """
    filters: list[dict[str, Any]] = [{"term": {"index": index}}]
    for name, value in (("stage", stage), ("reason", reason), ("doc_id", doc_id)):
        if value:
            filters.append({"term": {name: value}})
    return {"bool": {"filter": filters}}


def failure_summary(
    client: OpenSearch,
    failures_index: str,
    index: str,
    *,
    stage: str | None = None,
    reason: str | None = None,
    doc_id: str | None = None,
    limit: int = 20,
) -> FailureSummary:
    """Count and list the failure records of the equation index ``index`` (see the module doc).

    A missing failures index has no records. ``limit`` 0 counts without listing.
    """
    summary = FailureSummary(index)
    body = {
        "query": failure_query(index, stage=stage, reason=reason, doc_id=doc_id),
        "size": max(limit, 0),
        "track_total_hits": True,
        "sort": [{"failed_at": {"order": "desc", "unmapped_type": "date"}}, {"eq_id": "asc"}],
        "_source": RECORD_FIELDS,
        "aggs": {
            "stages": {
                "terms": {"field": "stage", "size": 50},
                "aggs": {"reasons": {"terms": {"field": "reason", "size": 200}}},
            }
        },
    }
    try:
        answer = client.search(index=failures_index, body=body)
    except NotFoundError:
        logger.info("no failures index %s: nothing failed yet", failures_index)
        return summary
    summary.total = int(answer["hits"]["total"]["value"])
    for bucket in answer["aggregations"]["stages"]["buckets"]:
        summary.by_stage[bucket["key"]] = {
            inner["key"]: inner["doc_count"] for inner in bucket["reasons"]["buckets"]
        }
    summary.records = [
        {name: hit["_source"].get(name) for name in RECORD_FIELDS} for hit in answer["hits"]["hits"]
    ]
    return summary
