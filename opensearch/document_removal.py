"""Removing documents' equations: revised documents (``index --prune``) and withdrawn ones.

Equation ids are the document id and the equation's position (docs/architecture.md, rule 4), so
indexing a revised document again overwrites the positions it still has and leaves the ones it lost:
a paper that went from 40 equations to 35 keeps five stale ones. Two ways out:

* :class:`ProducedIds` records what one indexing run produced for each document it read (its
  equations and its per-equation failure records); :func:`remove_equations` with ``keep`` then
  deletes, for those documents only, every equation and failure record that the run did not
  produce. A document whose source could not be read as a whole (its only item is a
  document-level failure, id ``<doc>#*``) is left as it was: an unreadable revision does not
  wipe the readable one.
* :func:`remove_equations` without ``keep`` deletes every equation and failure record of the
  given documents (a withdrawn paper: ``mathsearch delete``).

Both read the matching ids with a scroll (``_source``: ``doc_id`` and ``eq_id`` only) and delete
them by id in bulk (the node ships no ``_delete_by_query`` module), so a removal is idempotent:
running it again deletes nothing more. Failure records are matched on their ``index`` field, so
another equation index's records of the same document ids are not touched. The library's own
documents (enrichment's ``math.*`` fields) are not changed. The same call on the figures index
(whose documents have a ``doc_id`` too) removes documents' figures (``mathsearch delete
--figures``).

Example::

    produced = ProducedIds()
    for item in items:
        produced.add(item)
    report = remove_equations(client, "mathsearch-equations", failures_index,
                              produced.documents, keep=produced.ids)
    report.equations, report.failure_records
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import NotFoundError

from mathsearch.core.errors import WriteError
from mathsearch.indexer.records import EquationRecord, Failure, make_eq_id
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger(__name__)

#: document ids per ``terms`` query (well under the cluster's ``max_terms_count`` of 65,536)
CHUNK = 512


class ProducedIds:
    """The equation ids one indexing run produced, per document.

    ``add`` takes the run's items as they pass (equations and failures). A failure without a
    document (a missing source path) is ignored; a document-level failure (``<doc>#*``) marks
    its document unreadable unless the run also produced an equation or a per-equation
    failure of it.

    >>> produced = ProducedIds()
    >>> produced.add(Failure("a#0", "a", "extract", "too-large"))
    >>> produced.add(Failure("b#*", "b", "extract", "unreadable-source"))
    >>> produced.documents, sorted(produced.unreadable)
    (['a'], ['b'])
    """

    def __init__(self) -> None:
        self.ids: dict[str, set[str]] = {}
        self._whole: set[str] = set()

    def add(self, item: EquationRecord | Failure | Mapping[str, Any]) -> None:
        if isinstance(item, Mapping):
            doc_id, eq_id = str(item.get("doc_id") or ""), str(item.get("eq_id") or "")
        else:
            doc_id, eq_id = item.doc_id, item.eq_id
        if not doc_id:
            return
        if isinstance(item, Failure) and eq_id == make_eq_id(doc_id, "*"):
            self._whole.add(doc_id)
            return
        self.ids.setdefault(doc_id, set()).add(eq_id)

    @property
    def documents(self) -> list[str]:
        """The documents the run read (an equation or a per-equation failure), sorted."""
        return sorted(self.ids)

    @property
    def unreadable(self) -> set[str]:
        """Documents known only by a document-level failure: their equations are kept."""
        return self._whole - set(self.ids)


@dataclass
class RemovalReport:
    """What one :func:`remove_equations` call deleted."""

    documents: int = 0
    equations: int = 0
    failure_records: int = 0
    kept_unreadable: list[str] = field(default_factory=list)
    removed_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "equations": self.equations,
            "failure_records": self.failure_records,
            "kept_unreadable": self.kept_unreadable,
        }


def stale_hits(
    hits: Iterable[Mapping[str, Any]], keep: Mapping[str, Collection[str]] | None
) -> Iterator[tuple[str, str, str]]:
    """``(index, _id, eq_id)`` of the hits whose equation id ``keep`` does not list for their
    document (every hit when ``keep`` is ``None``).

    >>> hits = [{"_index": "i", "_id": "a#0", "_source": {"doc_id": "a", "eq_id": "a#0"}},
    ...         {"_index": "i", "_id": "a#5", "_source": {"doc_id": "a", "eq_id": "a#5"}}]
    >>> list(stale_hits(hits, {"a": {"a#0"}}))
    [('i', 'a#5', 'a#5')]
    """
    for hit in hits:
        source = hit.get("_source") or {}
        eq_id = str(source.get("eq_id") or hit["_id"])
        if keep is None or eq_id not in keep.get(str(source.get("doc_id") or ""), ()):
            yield str(hit["_index"]), str(hit["_id"]), eq_id


def remove_equations(
    client: OpenSearch,
    index: str,
    failures_index: str | None,
    documents: Sequence[str],
    *,
    keep: Mapping[str, Collection[str]] | None = None,
    settings: OpenSearchSettings | None = None,
    refresh: bool = True,
) -> RemovalReport:
    """Delete the equations and failure records of ``documents`` that ``keep`` does not list.

    Args:
        client: an OpenSearch client.
        index: the equation index or alias.
        failures_index: the failures index (``None``: leave failure records alone); only the
            records whose ``index`` field is ``index`` are candidates.
        documents: document ids.
        keep: per document, the equation ids to keep (``None``: remove everything of
            ``documents``; a document missing from ``keep`` loses all of its equations).
        settings: bulk settings (``MATHSEARCH_*`` by default).
        refresh: refresh both indexes afterwards, so searches stop returning what was removed.

    Raises:
        WriteError: the cluster refused deletions for good (their ids are in the message).
    """
    doc_ids = sorted(set(documents))
    report = RemovalReport(documents=len(doc_ids))
    if not doc_ids:
        return report
    writer = BulkWriter(client, settings, refresh="false")
    stale = _stale(client, index, doc_ids, keep)
    report.removed_ids = [eq_id for _, _, eq_id in stale]
    report.equations = _delete(writer, stale)
    targets = [index]
    if failures_index:
        records = _stale(client, failures_index, doc_ids, keep, {"term": {"index": index}})
        report.failure_records = _delete(writer, records)
        targets.append(failures_index)
    if refresh:
        client.indices.refresh(index=",".join(targets), ignore_unavailable=True)
    logger.info(
        "removed %d equations and %d failure records of %d documents from %s",
        report.equations,
        report.failure_records,
        report.documents,
        index,
    )
    return report


def _stale(
    client: OpenSearch,
    target: str,
    doc_ids: Sequence[str],
    keep: Mapping[str, Collection[str]] | None,
    only: dict[str, Any] | None = None,
) -> list[tuple[str, str, str]]:
    """:func:`stale_hits` of ``target``'s documents of ``doc_ids`` (and ``only``), scrolled
    ``CHUNK`` document ids at a time; [] when ``target`` does not exist."""
    found: list[tuple[str, str, str]] = []
    for start in range(0, len(doc_ids), CHUNK):
        query: dict[str, Any] = {"terms": {"doc_id": list(doc_ids[start : start + CHUNK])}}
        if only is not None:
            query = {"bool": {"filter": [query, only]}}
        body = {"query": query, "_source": ["doc_id", "eq_id"]}
        try:
            found += stale_hits(helpers.scan(client, index=target, query=body, size=1000), keep)
        except NotFoundError:
            logger.info("%s does not exist: nothing to remove there", target)
            return []
    return found


def _delete(writer: BulkWriter, stale: Sequence[tuple[str, str, str]]) -> int:
    """Delete ``stale`` (``(index, _id, eq_id)``); a document already gone (404) counts as
    done. Returns the count."""
    if not stale:
        return 0
    actions = [{"_op_type": "delete", "_index": index, "_id": doc} for index, doc, _ in stale]
    result = writer.write(actions)
    refused = [f for f in result.failures if f.status != 404]
    if refused:
        first = "; ".join(f"{f.doc_id}: {f.status} {f.reason}" for f in refused[:3])
        raise WriteError(f"{len(refused)} deletions refused by OpenSearch: {first}")
    return len(actions) - len(result.failures)
