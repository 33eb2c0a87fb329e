"""The corpus of ``mathsearch bench query``: real equations, their replicas, the query topics.

**Corpus.** The real equations of hep-th 2003 (``equation.txt``, ``eqnarray.txt``) and
``hep_array.txt.xz`` are extracted (:func:`mathsearch.indexer.extract.extract`), deduplicated on
their whitespace-normalised LaTeX, featurised (:class:`mathsearch.indexer.parse.Featuriser`:
MathML, graph, math tokens, symbols) and embedded with the real model (an
:class:`~mathsearch.runtime.embedders.Embedder`, the shipped ``gcn-v7`` unless
``MATHSEARCH_MODEL`` says otherwise). The equations are shuffled with a fixed seed (so that
every size mixes both corpora) and the last :data:`HELD_OUT` are held out: they are never
indexed and serve as queries, none of them twice in a run. The document fields and the float32
vectors are cached under ``<cache dir>/bench-query/<key>/`` (``docs.jsonl.gz`` +
``vectors.npy``), the key being a hash of the model's SHA-256, the vocabulary, the converter and
the source files (name, size, mtime), so the slow part (parse ~170 s + embed ~490 s for the
default corpus on 2 vCPUs) runs once. The default corpus gives 98,020 unique parsable equations,
88,020 indexable. The second stage's fields (:func:`add_field_vectors`: the default profile's
rerank encoders) are embedded once too, from the cached LaTeX, into ``extra-<model sha>.npy``.

**Sizes beyond the real equations** (100k: ~12k replicas; 1M: ~10 replicas of each equation):
:func:`iter_documents` adds replicas whose identifiers are renamed
(:mod:`mathsearch.opensearch.latex_renaming`). The renamed LaTeX is featurised again, so the
replica's
MathML, math tokens and symbols are those of its own LaTeX; the share of replicas whose tokens
equal the original's with the letters renamed is counted. A replica whose renamed LaTeX no longer
parses is skipped (counted). Replica vectors (:data:`REPLICA_VECTORS`):

* ``embed``: the real model embeds the renamed graph - honest, but at ~300 equations/s on a
  2-vCPU machine 900k replicas take ~50 minutes (cached per chunk of :data:`REPLICA_CHUNK`
  under the corpus cache, so an interrupted run resumes);
* ``copy``: **a shortcut** - a replica reuses the vector of the equation it renames, which the
  real model would not give exactly (the letters are one-hot node features).

**Queries.** :func:`read_topics` reads the ARQMath 2020-2022 Task 2 and NTCIR-12
formula-browsing topics (``../shared/data/mathir-topics/*.txt``, :func:`default_query_sources`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mathsearch.core.errors import MathsearchOpenSearchError
from mathsearch.core.paths import SHARED_DATA
from mathsearch.opensearch.latex_renaming import letter_permutation, rename_latex, rename_tokens
from mathsearch.workers.embedding import vectors_of

logger = logging.getLogger(__name__)

__all__ = [
    "HELD_OUT",
    "REPLICA_CHUNK",
    "REPLICA_VECTORS",
    "BenchCorpus",
    "ReplicaStats",
    "add_field_vectors",
    "default_query_sources",
    "default_sources",
    "iter_documents",
    "load_corpus",
    "progress_bar",
    "read_topics",
]

#: Corpus equations held out of every index, used as queries: enough that no query repeats in a
#: run (``bench query``: modes x (warm-up + 2 x timed); ``bench serve``: rate x seconds).
HELD_OUT = 10_000
SHUFFLE_SEED = 2003
#: Bump when the cached corpus layout or its content rules change.
CACHE_VERSION = 2
#: Replicas are renamed, parsed and (``embed``) embedded this many at a time (and cached so).
REPLICA_CHUNK = 8192
REPLICA_VECTORS = ("embed", "copy")
_EMBED_BATCH = 1024
_PARSE_BATCH = 256
_BULK_CHUNK = 500
_DOC_FIELDS = (
    "eq_id", "doc_id", "position", "section", "latex", "mathml", "input_format", "math_tokens",
    "symbols", "context", "source",
)  # fmt: skip


def read_topics(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[str, str]]:
    """``(topic id, LaTeX)`` of the ``ID<TAB>formula`` topic files (ARQMath / NTCIR)."""
    topics: list[tuple[str, str]] = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            topic, sep, latex = line.partition("\t")
            if sep and topic.strip() and latex.strip():
                topics.append((topic.strip(), latex.strip()))
    return topics


def default_bench_sources() -> list[str]:
    """The shared hep-th corpus beside the clone if present, else the bundled sample."""
    shared = SHARED_DATA / "hepth2003"
    if shared.is_dir():
        return [str(shared / "equation.txt"), str(shared / "eqnarray.txt")]
    return [str(resources.files("mathsearch.indexer").joinpath("resources/hepth2003-sample.txt"))]


def default_sources() -> list[str]:
    """hep-th 2003 (``equation.txt``, ``eqnarray.txt``) and ``hep_array.txt.xz`` when present."""
    sources = default_bench_sources()
    array = SHARED_DATA / "hep_array.txt.xz"
    if array.is_file():
        sources.append(str(array))
    return sources


def default_query_sources() -> list[str]:
    """The ARQMath / NTCIR topic files beside the clone (empty when absent)."""
    folder = SHARED_DATA / "mathir-topics"
    return sorted(str(p) for p in folder.glob("*.txt")) if folder.is_dir() else []


@dataclass
class BenchCorpus:
    """The unique real equations: document fields and vectors (shuffled), plus held-out ones;
    ``extra`` holds the indexable equations' vectors of other encoders by field (a second
    stage's exact-only fields: :func:`add_field_vectors`)."""

    docs: list[dict[str, Any]]
    vectors: np.ndarray
    held: list[dict[str, Any]]
    stats: dict[str, Any]
    cache_dir: Path
    key: str
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.docs)


def _records(docs: Sequence[dict[str, Any]]) -> list[Any]:
    """The equations of cached documents as records to featurise again."""
    from mathsearch.indexer.records import EquationRecord

    return [
        EquationRecord(
            eq_id=doc["eq_id"], doc_id=doc["doc_id"], position=int(doc.get("position", 0)),
            latex=doc.get("latex") or None,
            mathml=(doc.get("mathml") or None) if not doc.get("latex") else None,
        )
        for doc in docs
    ]  # fmt: skip


def add_field_vectors(
    corpus: BenchCorpus, embedders: Sequence[Any], *, progress: bool = True
) -> dict[str, float]:
    """Give ``corpus.extra`` each embedder's vectors of the indexable equations (a second
    stage's fields), from ``extra-<model sha>.npy`` in the corpus cache, else by featurising
    the cached LaTeX again and embedding it (then cached). Returns the embedding seconds of
    each field that was computed now."""
    from mathsearch.indexer.parse import Featuriser
    from mathsearch.indexer.records import Failure

    spent: dict[str, float] = {}
    todo = []
    for embedder in embedders:
        path = corpus.cache_dir / f"extra-{embedder.card.sha256[:16]}.npy"
        if path.is_file():
            vectors = np.load(path)
            if len(vectors) == len(corpus.docs):
                corpus.extra[embedder.vector_field] = vectors
                continue
        todo.append((embedder, path))
    if not todo:
        return spent
    featuriser = Featuriser()
    parts: dict[str, list[np.ndarray]] = {e.vector_field: [] for e, _ in todo}
    spent = {e.vector_field: 0.0 for e, _ in todo}
    records = _records(corpus.docs)
    with progress_bar(
        progress, total=len(records), desc="embed second-stage fields", unit="eq"
    ) as bar:
        try:
            for start in range(0, len(records), _EMBED_BATCH):
                parsed = featuriser.parse_batch(records[start : start + _EMBED_BATCH])
                bad = [item for item in parsed if isinstance(item, Failure)]
                equations = [item for item in parsed if not isinstance(item, Failure)]
                if bad:
                    raise MathsearchOpenSearchError(
                        f"cached equation {bad[0].eq_id} no longer parses ({bad[0].reason}): "
                        f"delete the corpus cache {corpus.cache_dir}"
                    )
                for embedder, _ in todo:
                    tick = time.perf_counter()
                    vectors = np.asarray(vectors_of(embedder, equations), dtype=np.float32)
                    spent[embedder.vector_field] += time.perf_counter() - tick
                    parts[embedder.vector_field].append(vectors)
                bar.update(len(parsed))
        finally:
            featuriser.close()
    for embedder, path in todo:
        vectors = np.concatenate(parts[embedder.vector_field]).astype(np.float32)
        np.save(path.with_suffix(".tmp.npy"), vectors)
        path.with_suffix(".tmp.npy").replace(path)
        corpus.extra[embedder.vector_field] = vectors
    return {name: round(seconds, 1) for name, seconds in spent.items()}


def _corpus_key(
    sources: Sequence[str], fmt: str | None, encoder: Any, converter: str, held_out: int = HELD_OUT
) -> str:
    parts: dict[str, Any] = {
        "version": CACHE_VERSION,
        "model_sha256": encoder.card.sha256,
        "vocab": encoder.card.vocab_hash,
        "converter": converter,
        "format": fmt,
        "seed": SHUFFLE_SEED,
        "held": held_out,
        "sources": [],
    }
    for source in sources:
        # by content, not mtime: a re-copied data folder (same bytes) keeps its cache
        digest = hashlib.sha256()
        with Path(source).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        parts["sources"].append([Path(source).name, digest.hexdigest()])
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _doc_fields(parsed: Any) -> dict[str, Any]:
    data = parsed.to_dict()
    return {name: data.get(name) for name in _DOC_FIELDS if data.get(name) is not None}


def progress_bar(progress: bool, **kwargs: Any) -> Any:
    """A tqdm bar (on stderr, only on a terminal) or, when ``progress`` is false, none."""
    return tqdm(disable=None if progress else True, **kwargs)


def load_corpus(
    sources: Sequence[str],
    fmt: str | None,
    encoder: Any,
    cache_root: Path,
    *,
    progress: bool = True,
    held_out: int = HELD_OUT,
) -> BenchCorpus:
    """The featurised, embedded unique equations of ``sources`` (from the cache when there), the
    last ``held_out`` of them (after the shuffle) held out as queries."""
    from mathsearch.indexer.extract import extract
    from mathsearch.indexer.parse import Featuriser
    from mathsearch.indexer.records import Failure

    featuriser = Featuriser()
    converter = getattr(featuriser.settings, "converter", "python")
    key = _corpus_key(sources, fmt, encoder, converter, held_out)
    folder = cache_root / key
    meta_path, docs_path, vectors_path = (
        folder / "meta.json",
        folder / "docs.jsonl.gz",
        folder / "vectors.npy",
    )
    if meta_path.is_file() and docs_path.is_file() and vectors_path.is_file():
        started = time.perf_counter()
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        with gzip.open(docs_path, "rt", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        vectors = np.load(vectors_path)
        logger.info(
            "corpus cache %s: %d equations in %.1f s",
            folder,
            len(rows),
            time.perf_counter() - started,
        )
        featuriser.close()
        held = rows[-meta["held_out"] :] if meta["held_out"] else []
        cached = rows[: len(rows) - len(held)]
        stats = {**meta, "cached": True, "indexable": len(cached)}
        return BenchCorpus(cached, vectors[: len(cached)], held, stats, folder, key)

    logger.info("building the bench corpus from %s (cache %s)", ", ".join(sources), folder)
    seen: set[str] = set()
    docs: list[dict[str, Any]] = []
    vector_parts: list[np.ndarray] = []
    failures: Counter[str] = Counter()
    extracted = duplicates = 0
    parse_s = embed_s = 0.0
    pending: list[Any] = []

    def flush() -> None:
        nonlocal parse_s, embed_s
        if not pending:
            return
        tick = time.perf_counter()
        parsed = featuriser.parse_batch(pending)
        tock = time.perf_counter()
        parse_s += tock - tick
        good = []
        for item in parsed:
            if isinstance(item, Failure):
                failures[f"{item.stage}/{item.reason}"] += 1
            else:
                good.append(item)
        if good:
            vector_parts.append(np.asarray(vectors_of(encoder, good), dtype=np.float32))
            docs.extend(_doc_fields(item) for item in good)
        embed_s += time.perf_counter() - tock
        bar.update(len(pending))
        pending.clear()

    bar = progress_bar(progress, desc="parse+embed corpus", unit="eq")
    try:
        for item in extract(list(sources), fmt):
            if isinstance(item, Failure):
                failures[f"{item.stage}/{item.reason}"] += 1
                continue
            extracted += 1
            text = " ".join((item.latex or item.mathml or "").split())
            if text in seen:
                duplicates += 1
                continue
            seen.add(text)
            pending.append(item)
            if len(pending) >= _EMBED_BATCH:
                flush()
        flush()
    finally:
        bar.close()
        featuriser.close()
    if len(docs) <= held_out:
        raise MathsearchOpenSearchError(
            f"the sources hold {len(docs)} parsable unique equations: need more than {held_out} "
            "(the held-out queries; fewer with --held-out-queries)"
        )
    vectors = np.concatenate(vector_parts).astype(np.float32)
    order = np.random.default_rng(SHUFFLE_SEED).permutation(len(docs))
    docs = [docs[i] for i in order]
    vectors = vectors[order]
    meta = {
        "key": key,
        "sources": [str(s) for s in sources],
        "model": encoder.card.name,
        "model_sha256": encoder.card.sha256,
        "converter": converter,
        "extracted": extracted,
        "duplicates": duplicates,
        "failed": sum(failures.values()),
        "failures": dict(failures.most_common(20)),
        "unique": len(docs),
        "held_out": held_out,
        "parse_s": round(parse_s, 1),
        "embed_s": round(embed_s, 1),
    }
    folder.mkdir(parents=True, exist_ok=True)
    tmp = docs_path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=3) as handle:
        for doc in docs:
            handle.write(json.dumps(doc, ensure_ascii=False) + "\n")
    tmp.replace(docs_path)
    np.save(folder / "vectors.tmp.npy", vectors)
    (folder / "vectors.tmp.npy").replace(vectors_path)
    meta_path.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    logger.info("cached %d equations under %s", len(docs), folder)
    held = docs[-held_out:]
    docs = docs[:-held_out]
    stats = {**meta, "cached": False, "indexable": len(docs)}
    return BenchCorpus(docs, vectors[: len(docs)], held, stats, folder, key)


@dataclass
class ReplicaStats:
    """What :func:`iter_documents` added beyond the real equations (filled as it goes)."""

    documents: int = 0
    skipped: int = 0
    consistent: int = 0
    embed_s: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)

    def to_dict(self, vectors: str) -> dict[str, Any]:
        """JSON-able, ``vectors`` being the replica vector mode."""
        return {
            "documents": self.documents,
            "vectors": vectors,
            "skipped": self.skipped,
            "skipped_by_reason": dict(self.failures.most_common(10)),
            "tokens_consistent": round(self.consistent / self.documents, 4)
            if self.documents
            else None,
            "embed_s": round(self.embed_s, 1),
        }


def _replica_chunk(
    corpus: BenchCorpus,
    replica: int,
    start: int,
    *,
    featuriser: Any,
    encoder: Any,
    replica_vectors: str,
    stats: ReplicaStats,
    extra: Sequence[Any] = (),
) -> Iterator[tuple[dict[str, Any], np.ndarray, dict[str, np.ndarray]]]:
    """Replica ``replica`` of the corpus equations ``start : start + REPLICA_CHUNK``, with
    the ``extra`` encoders' vectors too."""
    from mathsearch.indexer.records import EquationRecord, Failure

    mapping = letter_permutation(replica)
    bases = corpus.docs[start : start + REPLICA_CHUNK]
    records = [
        EquationRecord(
            eq_id=f"{doc['eq_id']}~r{replica}",
            doc_id=f"{doc['doc_id']}~r{replica}",
            position=int(doc.get("position", 0)),
            latex=rename_latex(doc.get("latex") or "", mapping),
            section=doc.get("section") or "",
            source=f"{doc.get('source', '')} replica {replica}",
        )
        for doc in bases
    ]
    parsed: list[Any] = []
    for offset in range(0, len(records), _PARSE_BATCH):
        parsed.extend(featuriser.parse_batch(records[offset : offset + _PARSE_BATCH]))
    good = [i for i, item in enumerate(parsed) if not isinstance(item, Failure)]
    for item in parsed:
        if isinstance(item, Failure):
            stats.skipped += 1
            stats.failures[f"{item.stage}/{item.reason}"] += 1

    def chunk_vectors(model: Any, copied: np.ndarray, suffix: str) -> np.ndarray:
        if replica_vectors == "copy":
            return copied[start : start + REPLICA_CHUNK][good]
        name = f"replica-r{replica}-c{start // REPLICA_CHUNK}{suffix}.npy"
        cached = corpus.cache_dir / name
        if cached.is_file():
            vectors = np.load(cached)
        else:
            tick = time.perf_counter()
            vectors = np.asarray(vectors_of(model, [parsed[i] for i in good]), dtype=np.float32)
            stats.embed_s += time.perf_counter() - tick
            np.save(cached.with_suffix(".tmp.npy"), vectors)
            cached.with_suffix(".tmp.npy").replace(cached)
        if len(vectors) != len(good):
            raise MathsearchOpenSearchError(f"replica vector cache {cached} is stale: delete it")
        return vectors

    vectors = chunk_vectors(encoder, corpus.vectors, "")
    others = {
        model.vector_field: chunk_vectors(
            model, corpus.extra[model.vector_field], f"-{model.card.sha256[:16]}"
        )
        for model in extra
    }
    for row, index in enumerate(good):
        item = parsed[index]
        doc = _doc_fields(item)
        if item.math_tokens == rename_tokens(bases[index].get("math_tokens") or [], mapping):
            stats.consistent += 1
        yield doc, vectors[row], {name: column[row] for name, column in others.items()}


def iter_documents(
    corpus: BenchCorpus,
    size: int,
    *,
    encoder: Any,
    replica_vectors: str,
    stats: ReplicaStats,
    extra: Sequence[Any] = (),
) -> Iterator[tuple[dict[str, Any], np.ndarray, dict[str, np.ndarray]]]:
    """``size`` documents: the corpus equations, then renamed replicas (module docstring);
    each with its vector and the ``extra`` encoders' vectors by field (``corpus.extra`` for
    the real ones: :func:`add_field_vectors`)."""
    from mathsearch.indexer.parse import Featuriser

    real = min(size, len(corpus))
    fields = [model.vector_field for model in extra]
    for i in range(real):
        yield corpus.docs[i], corpus.vectors[i], {name: corpus.extra[name][i] for name in fields}
    left = size - real
    if left <= 0:
        return
    featuriser = Featuriser()
    try:
        replica = 1
        while left > 0:
            for start in range(0, len(corpus), REPLICA_CHUNK):
                for doc, vector, others in _replica_chunk(
                    corpus,
                    replica,
                    start,
                    featuriser=featuriser,
                    encoder=encoder,
                    replica_vectors=replica_vectors,
                    stats=stats,
                    extra=extra,
                ):
                    yield doc, vector, others
                    stats.documents += 1
                    left -= 1
                    if left <= 0:
                        return
            replica += 1
            if replica > 1000:
                raise MathsearchOpenSearchError("no replica parses: cannot reach the size")
    finally:
        featuriser.close()
