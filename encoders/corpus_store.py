"""The on-disk form of a featurised :class:`~mathsearch.encoders.corpus.EquationCorpus` and its
cache key.

One ``.npz`` (``allow_pickle=False``): the five int32 id columns of all graphs concatenated
(``block``, shape ``(5, total nodes)``) with ``offsets`` per equation, ``eq_paper`` and
``eq_section``, and a JSON ``header`` (format version, vocabulary hash and sizes, equation ids,
paper ids, sections, citations, failure counts). A file of another format version or vocabulary
is refused (:class:`CorpusError`) and the corpus is parsed again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mathsearch.indexer.mathml_graph import EquationGraph
from mathsearch.indexer.parse import Featuriser

if TYPE_CHECKING:
    from mathsearch.encoders.corpus import EquationCorpus

logger = logging.getLogger(__name__)

__all__ = ["CORPUS_FORMAT", "CorpusError", "cache_key", "read_corpus", "write_corpus"]


class CorpusError(ValueError):
    """The corpus cannot be built, split, saved or loaded as asked."""


#: Version of the file layout; a different version is re-parsed, never misread.
CORPUS_FORMAT = 1
_COLUMNS = ("tag_ids", "attr_ids", "char_ids", "positions", "parents")


def write_corpus(corpus: EquationCorpus, path: str | os.PathLike[str]) -> Path:
    """Write ``corpus`` to ``path`` atomically (see the module docstring)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    graphs = corpus.graphs
    counts = np.array([g.num_nodes for g in graphs], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    if graphs:
        block = np.stack([np.concatenate([getattr(g, c) for g in graphs]) for c in _COLUMNS])
    else:
        block = np.zeros((5, 0), dtype=np.int32)
    header = {
        "format": CORPUS_FORMAT,
        "vocab_hash": corpus.vocab_hash,
        "sizes": list(graphs[0].sizes) if graphs else [],
        "eq_ids": corpus.eq_ids,
        "papers": corpus.paper_ids,
        "sections": [[p, title] for p, title in corpus.section_keys],
        "citations": corpus.citations,
        "failures": dict(corpus.failures),
    }
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(
        tmp,
        header=np.array(json.dumps(header)),
        block=block.astype(np.int32),
        offsets=offsets,
        eq_paper=corpus.eq_paper,
        eq_section=corpus.eq_section,
    )
    tmp.replace(path)
    return path


def _node_rows(
    block: np.ndarray, a: int, b: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Copies of nodes ``a:b``'s five id columns (``_COLUMNS``' order) of ``block``."""
    tag_ids, attr_ids, char_ids, positions, parents = (block[r, a:b].copy() for r in range(5))
    return tag_ids, attr_ids, char_ids, positions, parents


def read_corpus(path: str | os.PathLike[str], vocab_hash: str | None = None) -> dict[str, Any]:
    """The constructor arguments of the corpus in ``path`` (graphs, ids, papers, sections, ...).

    Raises:
        CorpusError: unreadable file, other format version, or ``vocab_hash`` mismatch.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            block, offsets = data["block"], data["offsets"]
            eq_paper, eq_section = data["eq_paper"], data["eq_section"]
    except (OSError, ValueError, KeyError) as exc:
        raise CorpusError(f"cannot read the corpus file {path}: {exc}") from exc
    if not isinstance(header, dict) or header.get("format") != CORPUS_FORMAT:
        raise CorpusError(f"{path}: not a corpus file of format {CORPUS_FORMAT}")
    if vocab_hash is not None and header["vocab_hash"] != vocab_hash:
        raise CorpusError(
            f"{path} was featurised with vocabulary {header['vocab_hash'][:12]}, "
            f"not {vocab_hash[:12]}"
        )
    sizes = tuple(header["sizes"])
    bounds = zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)
    graphs = [
        EquationGraph(*_node_rows(block, a, b), header["vocab_hash"], sizes) for a, b in bounds
    ]
    papers, sections = header["papers"], header["sections"]
    return {
        "graphs": graphs,
        "eq_ids": header["eq_ids"],
        "papers": [papers[p] for p in eq_paper.tolist()],
        "sections": [sections[s][1] for s in eq_section.tolist()],
        "citations": header["citations"],
        "failures": header["failures"],
    }


@functools.lru_cache(maxsize=4096)
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file's bytes (memoised per path, size and modification time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def source_stats(paths: Sequence[str]) -> list[list[Any]]:
    """``[absolute path, size, sha256 of the bytes]`` of each source (``[path, None]`` when
    unreadable): the part of a cache key that makes an edited source featurise again. The
    content, not the modification time, so a fresh copy of the same data (a new checkout of the
    shared folder) keeps its cache."""
    sources: list[list[Any]] = []
    for source in paths:
        entry: list[Any] = [os.path.abspath(source)]
        try:
            stat = os.stat(source)
            digest = _content_digest(entry[0], stat.st_size, stat.st_mtime_ns)
            entry += [stat.st_size, digest]
        except OSError:
            entry.append(None)
        sources.append(entry)
    return sources


def cache_key(
    paths: Sequence[str],
    fmt: str | None,
    limit: int | None,
    featuriser: Featuriser,
    citations: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """SHA-256 over the vocabulary hash, converter, format, limit, citations and the sources.

    Each source contributes its absolute path, size and content hash, so an edited file is
    parsed again.
    """
    sources = source_stats(paths)
    converter = featuriser.converter
    material = {
        "format": CORPUS_FORMAT,
        "vocab": featuriser.vocabulary.content_hash,
        "converter": [type(converter).__name__, bool(getattr(converter, "strict", False))],
        "fmt": fmt,
        "limit": limit,
        "sources": sources,
        "citations": {k: sorted(v) for k, v in sorted((citations or {}).items())},
    }
    text = json.dumps(material, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
