"""Dropping an equation index entirely (``mathsearch drop``): alias, versions, template, failures.

An equation index is more than one index (docs/opensearch.md, "The equation index"): the alias
``<alias>``, every versioned index behind it or left by a rebuild (``<alias>-000001``,
``<alias>-000002``, ...), the index template ``<alias>-template`` new versions are created from,
and its failure records in the shared failures index (those whose ``index`` field names the alias
or one of its versions; other indexes' records stay). :func:`plan_drop` finds them without
changing anything; :func:`drop_index` removes what a plan names, versions first (the alias goes
with them), then the template, then the failure records. Running it again after a partial drop
finishes the job: a plan lists whatever is left.

Only an equation index is dropped: a name with wildcards, a concrete index, or an alias over an
index whose mapping lacks ``_meta.mathsearch_schema`` (a library's own index) raises
:class:`~mathsearch.core.errors.MappingError` before anything changes. Failure records are read
with a scroll and deleted by id in bulk (the node ships no ``_delete_by_query`` module), as
:mod:`mathsearch.opensearch.document_removal` does.

Example::

    plan = plan_drop(client, "papers", "mathsearch-failures")
    plan.describe()   # 'papers: alias papers, 1 versioned index (papers-000001), ...'
    report = drop_index(client, plan)
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from opensearchpy import OpenSearch, helpers
from opensearchpy.exceptions import ConnectionError as ClusterConnectionError
from opensearchpy.exceptions import NotFoundError, TransportError

from mathsearch.core.errors import MappingError, WriteError, transport_reason
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.schema import template_name
from mathsearch.opensearch.settings import OpenSearchSettings

logger = logging.getLogger(__name__)

#: An alias ``drop`` accepts: lower case, no wildcards, commas or leading ``_``/``-``/``+``.
NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


@dataclass
class DropPlan:
    """What dropping ``alias`` removes (empty lists / ``None`` / 0 where there is nothing)."""

    alias: str
    alias_exists: bool = False
    indexes: list[str] = field(default_factory=list)
    template: str | None = None
    failures_index: str | None = None
    failure_records: int = 0

    @property
    def empty(self) -> bool:
        """Nothing of ``alias`` exists."""
        return not (self.alias_exists or self.indexes or self.template or self.failure_records)

    @property
    def targets(self) -> list[str]:
        """The names a failure record's ``index`` field may carry for this equation index."""
        return [self.alias, *self.indexes]

    def describe(self) -> str:
        """One line: what there is to remove.

        >>> DropPlan("p", True, ["p-000001"], "p-t", "f", 2).describe()
        'p: alias p, 1 versioned index (p-000001), index template p-t, 2 failure records in f'
        """
        parts = [f"alias {self.alias}"] if self.alias_exists else []
        if self.indexes:
            parts.append(f"{_versions(self.indexes)}")
        if self.template:
            parts.append(f"index template {self.template}")
        if self.failure_records:
            parts.append(f"{_records(self.failure_records)} in {self.failures_index}")
        return f"{self.alias}: {', '.join(parts) or 'nothing'}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DropReport:
    """What :func:`drop_index` removed."""

    alias: str
    indexes: list[str] = field(default_factory=list)
    template: str | None = None
    failure_records: int = 0

    def describe(self) -> str:
        """One line: what was removed.

        >>> DropReport("p", ["p-000001"], "p-t", 1).describe()
        'p: 1 versioned index (p-000001) with the alias, index template p-t, 1 failure record'
        """
        parts = [f"{_versions(self.indexes)} with the alias"] if self.indexes else []
        if self.template:
            parts.append(f"index template {self.template}")
        parts.append(_records(self.failure_records))
        return f"{self.alias}: {', '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _versions(indexes: list[str]) -> str:
    plural = "index" if len(indexes) == 1 else "indexes"
    return f"{len(indexes)} versioned {plural} ({', '.join(indexes)})"


def _records(count: int) -> str:
    return f"{count} failure record{'' if count == 1 else 's'}"


def versioned_pattern(alias: str) -> re.Pattern[str]:
    """The names of ``alias``'s versions: ``<alias>-`` and six digits.

    >>> pattern = versioned_pattern("p")
    >>> bool(pattern.fullmatch("p-000002")), bool(pattern.fullmatch("p-x"))
    (True, False)
    """
    return re.compile(rf"{re.escape(alias)}-\d{{6}}")


def plan_drop(client: OpenSearch, alias: str, failures_index: str | None) -> DropPlan:
    """Find what dropping ``alias`` removes; changes nothing.

    Raises:
        MappingError: ``alias`` is not an index name (wildcards, upper case, ...), names a
            concrete index rather than an alias, or covers an index that is not a mathsearch
            equation index; or the cluster refused a read.
    """
    if not NAME.fullmatch(alias):
        raise MappingError(f"not an equation index name: {alias!r} (no wildcards or commas)")
    plan = DropPlan(alias, failures_index=failures_index)
    try:
        behind = _alias_indexes(client, alias)
        plan.alias_exists = bool(behind)
        if not behind and client.indices.exists(index=alias):
            raise MappingError(
                f"{alias} is an index, not an equation index's alias: nothing dropped"
            )
        found = client.indices.get(index=f"{alias}-0*", expand_wildcards="all")
        pattern = versioned_pattern(alias)
        plan.indexes = sorted({n for n in found if pattern.fullmatch(n)} | set(behind))
        foreign = _foreign(client, plan.indexes)
        if foreign:
            raise MappingError(
                f"{alias} covers {', '.join(foreign)}, which is not a mathsearch equation index "
                "(no _meta.mathsearch_schema): nothing dropped"
            )
        try:
            client.indices.get_index_template(name=template_name(alias))
            plan.template = template_name(alias)
        except NotFoundError:
            plan.template = None
        if failures_index:
            plan.failure_records = _count(client, failures_index, plan.targets)
    except ClusterConnectionError:
        raise  # the command line names the URL and the setting to change
    except TransportError as exc:
        raise MappingError(f"cannot read what {alias} holds: {transport_reason(exc)}") from exc
    return plan


def drop_index(
    client: OpenSearch, plan: DropPlan, settings: OpenSearchSettings | None = None
) -> DropReport:
    """Remove what ``plan`` names: the versioned indexes (and with them the alias), the index
    template and the failure records (found again, so records written since the plan go too).

    Raises:
        MappingError: the cluster refused to delete an index or the template.
        WriteError: it refused to delete failure records.
    """
    report = DropReport(plan.alias)
    try:
        if plan.indexes:
            client.indices.delete(index=",".join(plan.indexes), ignore_unavailable=True)
            report.indexes = list(plan.indexes)
        if plan.template:
            try:
                client.indices.delete_index_template(name=plan.template)
                report.template = plan.template
            except NotFoundError:
                report.template = None
    except ClusterConnectionError:
        raise
    except TransportError as exc:
        raise MappingError(f"cannot drop {plan.alias}: {transport_reason(exc)}") from exc
    if plan.failures_index:
        report.failure_records = _delete_records(
            client, plan.failures_index, plan.targets, settings
        )
    logger.info(
        "dropped %s: %d indexes, template %s, %d failure records",
        plan.alias,
        len(report.indexes),
        report.template or "none",
        report.failure_records,
    )
    return report


def _alias_indexes(client: OpenSearch, alias: str) -> list[str]:
    try:
        return sorted(client.indices.get_alias(name=alias))
    except NotFoundError:
        return []


def _foreign(client: OpenSearch, indexes: list[str]) -> list[str]:
    """Those of ``indexes`` whose mapping has no ``_meta.mathsearch_schema``."""
    if not indexes:
        return []
    found = client.indices.get_mapping(index=",".join(indexes))
    return sorted(
        name
        for name, entry in found.items()
        if "mathsearch_schema" not in (entry.get("mappings", {}).get("_meta") or {})
    )


def _count(client: OpenSearch, failures_index: str, targets: list[str]) -> int:
    body = {"query": {"terms": {"index": targets}}}
    try:
        return int(client.count(index=failures_index, body=body)["count"])
    except NotFoundError:
        return 0


def _delete_records(
    client: OpenSearch,
    failures_index: str,
    targets: list[str],
    settings: OpenSearchSettings | None,
) -> int:
    """Delete the failure records whose ``index`` is one of ``targets`` by id; the count."""
    body = {"query": {"terms": {"index": targets}}, "_source": False}
    try:
        ids = [h["_id"] for h in helpers.scan(client, index=failures_index, query=body)]
    except NotFoundError:
        return 0
    except ClusterConnectionError:
        raise
    except TransportError as exc:
        raise WriteError(f"cannot read the failure records: {transport_reason(exc)}") from exc
    if not ids:
        return 0
    writer = BulkWriter(client, settings, refresh="false")
    actions = [{"_op_type": "delete", "_index": failures_index, "_id": i} for i in ids]
    result = writer.write(actions)
    refused = [f for f in result.failures if f.status != 404]
    if refused:
        first = "; ".join(f"{f.doc_id}: {f.status} {f.reason}" for f in refused[:3])
        raise WriteError(f"{len(refused)} failure-record deletions refused: {first}")
    client.indices.refresh(index=failures_index, ignore_unavailable=True)
    return len(ids) - len(result.failures)
