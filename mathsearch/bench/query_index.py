"""The indexes of ``mathsearch bench query``: build, reuse, measure and drop one per size.

One index per size behind the alias ``<prefix>-bench-<N>`` (the normal equation mapping of
:func:`mathsearch.opensearch.equation_index.ensure_equation_index`: lucene HNSW, ``m`` and
``ef_construction`` from
the settings, one shard, no replica). Documents are the normal
:func:`mathsearch.opensearch.documents.equation_source` documents (MathML only for MathML input)
of :func:`mathsearch.bench.corpus.iter_documents`, written as plain ``index`` actions with
``opensearchpy.helpers.parallel_bulk`` (2 threads) and the refresh interval off during the load -
faster than the production :class:`~mathsearch.opensearch.bulk_writer.BulkWriter`, whose upserts
must read
each document first; the content is identical. The index's ``_meta`` records what it was built
from; an index that holds ``N`` documents built from the same model and corpus is reused
(``rebuild`` drops and rebuilds it). ``force_merge`` merges it to one segment (otherwise it is
measured as a bulk load leaves it, once :func:`wait_for_merges` saw its background merges end).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from mathsearch.bench.corpus import (
    BenchCorpus,
    ReplicaStats,
    iter_documents,
    progress_bar,
)
from mathsearch.core.errors import MathsearchOpenSearchError

logger = logging.getLogger(__name__)

__all__ = [
    "bench_alias",
    "build_index",
    "drop_bench_index",
    "index_info",
    "settled_index_info",
    "wait_for_merges",
]

_BULK_CHUNK = 500


def bench_alias(prefix: str, size: int) -> str:
    """The alias of the bench index of ``size`` equations."""
    return f"{prefix}-bench-{size}"


def _index_actions(
    concrete: str,
    documents: Iterable[tuple[dict[str, Any], np.ndarray, dict[str, np.ndarray]]],
    field_name: str,
    storage: str,
) -> Iterator[dict[str, Any]]:
    """Index actions; the extra (second-stage) fields encoded as ``storage`` (float16 / int8),
    as the workers write them."""
    from mathsearch.opensearch.documents import equation_source, now_iso
    from mathsearch.opensearch.stored_vectors import VectorStorage, encode_vector
    from mathsearch.runtime.embedder_base import written_vector

    kept = VectorStorage.parse(storage)
    stamp = now_iso()
    for parsed, vector, extra in documents:
        vectors: dict[str, Any] = {field_name: written_vector(vector)}
        vectors.update({name: encode_vector(v, kept) for name, v in extra.items()})
        source = equation_source(parsed, vectors)
        source["indexed_at"] = stamp
        yield {"_op_type": "index", "_index": concrete, "_id": source["eq_id"], "_source": source}


def _bench_meta(
    corpus: BenchCorpus, size: int, replica_vectors: str, settings: Any, extra: dict[str, str]
) -> dict[str, Any]:
    """What a reusable bench index must match: corpus, size, model, the second stage's fields
    (field -> model SHA-256 and storage) and the HNSW graph's parameters
    (``MATHSEARCH_HNSW_M`` / ``_EF_CONSTRUCTION``: another value rebuilds it)."""
    return {
        "equations": size,
        "corpus_key": corpus.key,
        "model_sha256": corpus.stats["model_sha256"],
        "replica_vectors": replica_vectors if size > len(corpus) else None,
        "hnsw_m": settings.hnsw_m,
        "hnsw_ef_construction": settings.hnsw_ef_construction,
        "rerank_fields": extra,
    }


def index_info(client: Any, concrete: str) -> dict[str, Any]:
    """Documents, store bytes and segments of ``concrete`` (primaries)."""
    stats = client.indices.stats(index=concrete, metric="store,docs,segments")
    primaries = stats["indices"][concrete]["primaries"]
    return {
        "docs": int(primaries["docs"]["count"]),
        "store_bytes": int(primaries["store"]["size_in_bytes"]),
        "segments": int(primaries["segments"]["count"]),
    }


def settled_index_info(
    client: Any, concrete: str, *, interval_s: float = 3.0, limit_s: float = 90.0
) -> dict[str, Any]:
    """:func:`index_info` once the store size has settled.

    Right after a merge the files of the merged-away segments are still on disk until the
    next commit, and the node caches store sizes for ``index.store.stats_refresh_interval``
    (10 s by default): a size read then counted both (a force-merged 100k index read 3,923 B per
    equation, and 1,721 B 20 s later). So: flush (commit), then read until the size is the same
    for three readings over more than the cache's 10 s, or ``limit_s`` passes.
    """
    client.indices.flush(index=concrete)
    started = time.perf_counter()
    info = index_info(client, concrete)
    same_since = started
    while time.perf_counter() - started < limit_s:
        time.sleep(interval_s)
        again = index_info(client, concrete)
        if again["store_bytes"] != info["store_bytes"]:
            same_since = time.perf_counter()
        elif time.perf_counter() - same_since > 10.0 + 2 * interval_s:
            return again
        info = again
    logger.warning("%s: store size still changing after %.0f s", concrete, limit_s)
    return info


def drop_bench_index(client: Any, alias: str, prefix: str) -> None:
    """Delete the bench index behind ``alias`` (only ever a ``<prefix>-bench-*`` index)."""
    from mathsearch.opensearch.schema import resolve_alias

    name = resolve_alias(client, alias)
    if name is None and client.indices.exists(index=alias):
        name = alias  # a plain index squatting on the alias's name
    if name is not None and name.startswith(f"{prefix}-bench-"):
        logger.info("deleting %s", name)
        client.indices.delete(index=name)


def _force_merge(client: Any, concrete: str) -> None:
    """Merge ``concrete`` to one segment."""
    logger.info("force-merging %s to one segment", concrete)
    client.indices.forcemerge(index=concrete, max_num_segments=1, request_timeout=3600)
    client.indices.refresh(index=concrete)


def build_index(
    client: Any,
    settings: Any,
    corpus: BenchCorpus,
    size: int,
    *,
    encoder: Any,
    replica_vectors: str,
    rebuild: bool,
    force_merge: bool,
    progress: bool,
    extra: Sequence[Any] = (),
    storage: str = "float16",
) -> dict[str, Any]:
    """Build (or reuse) ``<prefix>-bench-<size>``; what it holds and how long it took.

    ``extra`` embedders (the default profile's rerank encoders, their vectors in
    ``corpus.extra``) fill exact-only fields kept as ``storage``, as ``mathsearch index``
    writes them."""
    from opensearchpy import helpers

    from mathsearch.opensearch.equation_index import ensure_equation_index
    from mathsearch.opensearch.schema import VectorSpec, index_meta, resolve_alias

    alias = bench_alias(settings.index_prefix, size)
    fields = {e.vector_field: f"{e.card.sha256[:16]}/{storage}" for e in extra}
    wanted = _bench_meta(corpus, size, replica_vectors, settings, fields)
    concrete = resolve_alias(client, alias)
    if concrete is not None and not rebuild:
        meta = index_meta(client, alias)
        built = meta.get("bench_query") or {}
        info = index_info(client, concrete)
        if {k: built.get(k) for k in wanted} == wanted and info["docs"] == size:
            logger.info("reusing %s (%d equations)", concrete, size)
            merged = bool(built.get("force_merged"))
            if force_merge and info["segments"] > 1:
                _force_merge(client, concrete)
                info, merged = index_info(client, concrete), True
            return {
                "index": concrete,
                "reused": True,
                "force_merged": merged,
                "build_s": built.get("build_s", 0.0),
                "replicas": built.get("replicas"),
                **info,
            }
        logger.info("%s does not hold this corpus at this size: rebuilding", alias)
    drop_bench_index(client, alias, settings.index_prefix)
    spec = VectorSpec.from_card(encoder.card)
    specs = [spec, *(VectorSpec.from_card(e.card, storage) for e in extra)]
    concrete = ensure_equation_index(client, alias, specs, settings)
    client.indices.put_settings(index=concrete, body={"index": {"refresh_interval": "-1"}})
    stats = ReplicaStats()
    started = time.perf_counter()
    documents = iter_documents(
        corpus, size, encoder=encoder, replica_vectors=replica_vectors, stats=stats, extra=extra
    )
    errors: Counter[str] = Counter()
    written = 0
    with progress_bar(progress, total=size, desc=f"bulk load {size:,}", unit="eq") as bar:
        for ok, item in helpers.parallel_bulk(
            client,
            _index_actions(concrete, documents, spec.field, storage),
            thread_count=2,
            queue_size=4,
            chunk_size=_BULK_CHUNK,
            max_chunk_bytes=settings.bulk_chunk_bytes,
            raise_on_error=False,
            request_timeout=300,
        ):
            if ok:
                written += 1
            else:
                error = next(iter(item.values())).get("error") or {}
                errors[str(error.get("type", error))[:80]] += 1
            bar.update(1)
    client.indices.put_settings(index=concrete, body={"index": {"refresh_interval": None}})
    client.indices.refresh(index=concrete, request_timeout=600)
    if errors:
        raise MathsearchOpenSearchError(
            f"{sum(errors.values())} documents refused while loading {concrete}: "
            + ", ".join(f"{k} x{v}" for k, v in errors.most_common(5))
        )
    if force_merge:
        _force_merge(client, concrete)
    build_s = time.perf_counter() - started
    replicas = stats.to_dict(replica_vectors) if size > len(corpus) else None
    meta = index_meta(client, alias)
    meta["bench_query"] = {
        **wanted,
        "build_s": round(build_s, 1),
        "replicas": replicas,
        "force_merged": force_merge,
    }
    client.indices.put_mapping(index=concrete, body={"_meta": meta})
    info = index_info(client, concrete)
    if info["docs"] != size:
        raise MathsearchOpenSearchError(f"{concrete} holds {info['docs']} documents, not {size}")
    logger.info("built %s: %d equations in %.1f s", concrete, written, build_s)
    return {
        "index": concrete,
        "reused": False,
        "force_merged": force_merge,
        "build_s": round(build_s, 1),
        "replicas": replicas,
        **info,
    }


def wait_for_merges(client: Any, concrete: str, limit_s: float = 900.0) -> float:
    """Wait until no merge runs on ``concrete`` (a fresh bulk load keeps merging for a while);
    the seconds waited."""
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        stats = client.indices.stats(index=concrete, metric="merge")
        if not stats["indices"][concrete]["primaries"]["merges"]["current"]:
            break
        time.sleep(2.0)
    else:
        logger.warning("%s still merging after %.0f s: timing anyway", concrete, limit_s)
    return time.perf_counter() - started
