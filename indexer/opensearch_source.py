"""Equations from an existing OpenSearch index, read with a point in time and ``search_after``.

The index is read page by page (``batch_size`` hits) inside one point in time (PIT), so a
concurrent writer cannot make a page skip or repeat documents; the PIT is deleted at the end,
also when the consumer stops early or an error is raised. Hits are sorted by ``_shard_doc``
(the cheapest unique order, OpenSearch 3.3 and later) and by ``_id`` on older clusters, which
answer "No mapping found for [_shard_doc]" (sorting on ``_id`` loads its field data on the
cluster's heap; the deprecation warning that 2.x clusters send back for it is not passed on,
since the reader has no other unique order there).

Two modes:

* ``"latex"``: ``field`` holds one equation's LaTeX, or a list of them;
* ``"text"``: ``field`` holds full text whose display math is found by
  :mod:`mathsearch.indexer.display_math` (with context windows).

``doc_id`` is the hit's ``_id`` (or the value of ``id_field``), ``eq_id`` is
``make_eq_id(doc_id, position)``. A document without the field becomes a :class:`Failure`
with reason ``missing-field``; a cluster that cannot be reached raises
:class:`~mathsearch.core.errors.ClusterUnavailableError`, any other refusal of the cluster
(missing index, bad query) :class:`~mathsearch.core.errors.MathsearchOpenSearchError`.

Example::

    from mathsearch.opensearch import connect
    for item in iter_opensearch_index(connect(), "papers", "abstract", mode="text"):
        ...
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import OpenSearchWarning, TransportError

from mathsearch.core.cluster_faults import client_url, cluster_fault
from mathsearch.core.errors import (
    ClusterUnavailableError,
    MathsearchOpenSearchError,
    transport_reason,
)
from mathsearch.indexer.records import EquationRecord, Failure, excerpt, make_eq_id
from mathsearch.indexer.settings import IndexerSettings

logger = logging.getLogger(__name__)

MODES = ("latex", "text")
_SHARD_DOC_SORT = [{"_shard_doc": "asc"}]
_ID_SORT = [{"_id": "asc"}]
#: what a 2.x cluster's deprecation header says when a search sorts on ``_id``
_ID_FIELDDATA_WARNING = r".*fielddata on the _id field"


def iter_opensearch_index(
    client: OpenSearch,
    index: str,
    field: str,
    *,
    mode: str = "latex",
    id_field: str | None = None,
    section_field: str | None = None,
    batch_size: int = 500,
    query: dict[str, Any] | None = None,
    settings: IndexerSettings | None = None,
    keep_alive: str = "5m",
    progress: bool = False,
) -> Iterator[EquationRecord | Failure]:
    """Every equation of every document of ``index`` (see the module docstring).

    ``field``, ``id_field`` and ``section_field`` may be dotted paths into ``_source``
    (``"math.latex"``). ``query`` restricts the documents (default: all). ``progress`` shows a
    tqdm bar on stderr; library callers leave it off. ``mode`` is one of :data:`MODES` (the
    module docstring).

    Raises:
        ValueError: another ``mode``, a ``batch_size`` below 1 or an empty ``field``.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if not field:
        raise ValueError("field must name a _source field")
    return _iterate(
        client,
        index,
        field,
        mode=mode,
        id_field=id_field,
        section_field=section_field,
        batch_size=batch_size,
        query=query,
        settings=settings or IndexerSettings(),
        keep_alive=keep_alive,
        progress=progress,
    )


def _iterate(
    client: OpenSearch,
    index: str,
    field: str,
    *,
    mode: str,
    id_field: str | None,
    section_field: str | None,
    batch_size: int,
    query: dict[str, Any] | None,
    settings: IndexerSettings,
    keep_alive: str,
    progress: bool,
) -> Iterator[EquationRecord | Failure]:
    """The generator behind :func:`iter_opensearch_index` (arguments already checked)."""
    fields = [name for name in (field, id_field, section_field) if name]
    pit_id = _create_pit(client, index, keep_alive)
    bar = _progress_bar(progress, index)
    try:
        sort = _initial_sort(client)
        search_after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": batch_size,
                "query": query or {"match_all": {}},
                "pit": {"id": pit_id, "keep_alive": keep_alive},
                "sort": sort,
                "_source": fields,
                "track_total_hits": bar is not None and search_after is None,
            }
            if search_after is not None:
                body["search_after"] = search_after
            try:
                response = _search(client, index, body, sort)
                _check_shards(response, index)
            except MathsearchOpenSearchError as exc:
                if sort == _SHARD_DOC_SORT and "_shard_doc" in str(exc.__cause__ or exc):
                    logger.debug("cluster cannot sort on _shard_doc; sorting on _id")
                    sort = _ID_SORT
                    continue
                raise
            pit_id = response.get("pit_id") or pit_id
            hits = response["hits"]["hits"]
            if bar is not None and search_after is None:
                bar.total = (response["hits"].get("total") or {}).get("value")
                bar.refresh()
            if not hits:
                break
            for hit in hits:
                yield from _hit_records(
                    hit,
                    field,
                    mode=mode,
                    id_field=id_field,
                    section_field=section_field,
                    settings=settings,
                )
            if bar is not None:
                bar.update(len(hits))
            if len(hits) < batch_size:
                break
            search_after = hits[-1]["sort"]
    finally:
        if bar is not None:
            bar.close()
        _delete_pit(client, pit_id)


def _search(
    client: OpenSearch, index: str, body: dict[str, Any], sort: list[dict[str, str]]
) -> Any:
    """One page; the ``_id`` sort's deprecation warning is dropped (see the module docstring)."""
    with warnings.catch_warnings():
        if sort == _ID_SORT:
            warnings.filterwarnings(
                "ignore", message=_ID_FIELDDATA_WARNING, category=OpenSearchWarning
            )
        return _call(client.search, f"search {index}", body=body)


def _call(method: Any, what: str, **kwargs: Any) -> Any:
    """Call the client; connection problems and refusals become typed errors."""
    try:
        return method(**kwargs)
    except OSConnectionError as exc:
        line = cluster_fault(exc, client_url(getattr(method, "__self__", None)))
        raise ClusterUnavailableError(f"{what}: {line or exc}") from exc
    except TransportError as exc:
        raise MathsearchOpenSearchError(f"{what}: {transport_reason(exc)}") from exc


def _initial_sort(client: OpenSearch) -> list[dict[str, str]]:
    """``_shard_doc`` where the cluster says it is OpenSearch 3.3 or later, ``_id`` otherwise."""
    try:
        version = _call(client.info, "cluster info").get("version", {})
    except ClusterUnavailableError:
        raise
    except MathsearchOpenSearchError as exc:  # e.g. no cluster:monitor/main permission
        logger.debug("cluster version unknown (%s); trying _shard_doc", exc)
        return _SHARD_DOC_SORT
    try:
        major, minor = (int(part) for part in str(version.get("number", "")).split(".")[:2])
    except ValueError:
        return _SHARD_DOC_SORT
    is_opensearch = version.get("distribution", "opensearch") == "opensearch"
    return _SHARD_DOC_SORT if is_opensearch and (major, minor) >= (3, 3) else _ID_SORT


def _check_shards(response: dict[str, Any], index: str) -> None:
    """Raise when some shards failed: a partial page would silently lose documents."""
    shards = response.get("_shards") or {}
    if not shards.get("failed"):
        return
    failures = shards.get("failures") or [{}]
    reason = failures[0].get("reason") if isinstance(failures[0], dict) else None
    reason = reason.get("reason", reason) if isinstance(reason, dict) else reason
    raise MathsearchOpenSearchError(
        f"search {index}: {shards['failed']} of {shards.get('total')} shards failed "
        f"({reason}); refusing to return part of the index"
    )


def _create_pit(client: OpenSearch, index: str, keep_alive: str) -> str:
    response = _call(
        client.create_pit,
        f"create a point in time on {index}",
        index=index,
        params={"keep_alive": keep_alive},
    )
    pit_id = response.get("pit_id") or response.get("id")
    if not pit_id:
        raise MathsearchOpenSearchError(f"create a point in time on {index}: no id in {response}")
    logger.debug("opened a point in time on %s", index)
    return str(pit_id)


def _delete_pit(client: OpenSearch, pit_id: str) -> None:
    try:
        client.delete_pit(body={"pit_id": [pit_id]})
        logger.debug("deleted the point in time")
    except Exception as exc:  # the PIT expires by itself; never mask the caller's error
        logger.warning("could not delete point in time (it expires by itself): %s", exc)


def _progress_bar(progress: bool, index: str) -> Any:
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(desc=f"reading {index}", unit="doc")


def _lookup(source: dict[str, Any], path: str) -> Any:
    """``source[path]``, following dots into nested objects (``"math.latex"``)."""
    if path in source:
        return source[path]
    value: Any = source
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _hit_records(
    hit: dict[str, Any],
    field: str,
    *,
    mode: str,
    id_field: str | None,
    section_field: str | None,
    settings: IndexerSettings,
) -> Iterator[EquationRecord | Failure]:
    source = hit.get("_source") or {}
    doc_id = str(hit["_id"])
    if id_field:
        named = _lookup(source, id_field)
        if isinstance(named, str | int) and not isinstance(named, bool) and str(named):
            doc_id = str(named)
        else:
            logger.debug("%s has no usable %s; using its _id", hit["_id"], id_field)
    where = f"opensearch:{hit.get('_index', '')}/{hit['_id']}"
    section = _lookup(source, section_field) if section_field else ""
    section = section if isinstance(section, str) else ""
    value = _lookup(source, field)

    def failure(position: int | str, reason: str, detail: str, text: str = "") -> Failure:
        return Failure(
            eq_id=make_eq_id(doc_id, position),
            doc_id=doc_id,
            stage="extract",
            reason=reason,
            detail=detail,
            source=where,
            excerpt=excerpt(text),
        )

    if value is None or value in ([], ""):
        yield failure("*", "missing-field", f"document {hit['_id']} has no {field!r}")
        return
    if mode == "text":
        if not isinstance(value, str):
            value = (
                "\n\n".join(v for v in value if isinstance(v, str))
                if isinstance(value, list)
                else None
            )
        if value is None:
            yield failure("*", "invalid-field", f"{field!r} is not text")
            return
        from mathsearch.indexer.jsonl_source import equations_in_text

        yield from equations_in_text(
            value, doc_id, source=where, section=section, settings=settings
        )
        return
    values = value if isinstance(value, list) else [value]
    for position, latex in enumerate(values):
        if not isinstance(latex, str):
            detail = f"{field!r}[{position}] is a {type(latex).__name__}, not LaTeX"
            yield failure(position, "invalid-field", detail)
        elif not latex.strip():
            yield failure(position, "empty-equation", f"{field!r}[{position}] is blank")
        else:
            yield EquationRecord(
                eq_id=make_eq_id(doc_id, position),
                doc_id=doc_id,
                position=position,
                latex=latex,
                section=section,
                source=where,
            )
