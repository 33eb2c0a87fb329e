"""The bitmap CNN's corpus: rendered 333x32 crops with paper, LaTeX and text (ECML 2019, sec. 3).

Every equation record of the sources (:func:`mathsearch.indexer.extract.extract`) is rendered with
:func:`mathsearch.indexer.bitmap.render_bitmap` and cut to the seed's centre rectangle
(:func:`mathsearch.indexer.bitmap.centre_crop`): the one featurisation of docs/architecture.md, rule
2, shared with the runtime (:mod:`mathsearch.runtime.bitmap_runtime`). Equations that cannot be
drawn
(unknown user macros, mathtext syntax, blank images - the seed's cleaning) are dropped and counted
by reason.

For the proxy tasks each crop keeps its paper (``doc_id``: document context), its LaTeX (symbol
labels) and the text the source gives it (``context`` of .tex records; keyword labels). hep-th
record files carry no text, so their ``context`` is empty.

Rendering runs at 30-45 equations/s per process, so the corpus is cached as one ``.npz`` (no
pickle) named after a key over the render settings, the format, the limit and the sources (path,
size, mtime), like :mod:`mathsearch.encoders.corpus_store`; ``workers`` > 1 renders in processes.

Example::

    corpus = BitmapCorpus.cached(["data/hepth2003/equation.txt"], "hepth", "runs/cache")
    train, test = corpus.split_by_paper(0.2, seed=0)

Torch-free (numpy only).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from mathsearch.encoders.corpus_store import source_stats
from mathsearch.indexer.bitmap import (
    BitmapSettings,
    RenderError,
    centre_crop,
    render_bitmap,
    settings_hash,
)
from mathsearch.indexer.records import EquationRecord, Failure

logger = logging.getLogger(__name__)

__all__ = ["CACHE_FORMAT", "BitmapCorpus", "BitmapCorpusError", "render_crop"]

CACHE_FORMAT = 1
_CHUNK = 64


class BitmapCorpusError(ValueError):
    """The corpus cannot be built, split, saved or loaded as asked."""


def render_crop(latex: str, settings: BitmapSettings) -> np.ndarray | str:
    """The ``(32, 333)`` uint8 crop of ``latex``, or the render failure's reason code."""
    try:
        return centre_crop(render_bitmap(latex, settings), settings)
    except RenderError as exc:
        return exc.reason
    except Exception as exc:  # errors are data
        logger.debug("render failed: %r", exc)
        return "render-error"


def _render_chunk(args: tuple[list[str], BitmapSettings]) -> list[np.ndarray | str]:
    latexes, settings = args
    return [render_crop(latex, settings) for latex in latexes]


class BitmapCorpus:
    """Rendered crops with their paper, LaTeX and context (see the module docstring).

    Args:
        crops: uint8 ``(N, crop_height, crop_width)``, 255 = paper.
        eq_ids, papers, latex, contexts: one entry per crop.
        settings_digest: :func:`mathsearch.runtime.bitmap_runtime.settings_hash` of the render
        settings.
        failures: dropped equations by ``stage/reason``.

    Raises:
        BitmapCorpusError: columns of different lengths or crops that are not 3-d uint8.
    """

    def __init__(
        self,
        crops: np.ndarray,
        eq_ids: Sequence[str],
        papers: Sequence[str],
        latex: Sequence[str],
        contexts: Sequence[str],
        *,
        settings_digest: str,
        failures: Mapping[str, int] | None = None,
    ) -> None:
        crops = np.asarray(crops)
        if crops.ndim != 3 or crops.dtype != np.uint8:
            raise BitmapCorpusError(
                f"crops must be uint8 (N, H, W), got {crops.dtype} {crops.shape}"
            )
        if not len(crops) == len(eq_ids) == len(papers) == len(latex) == len(contexts):
            raise BitmapCorpusError("crops, eq_ids, papers, latex and contexts differ in length")
        self.crops = crops
        self.eq_ids = [str(x) for x in eq_ids]
        self.latex = [str(x) for x in latex]
        self.contexts = [str(x) for x in contexts]
        self.settings_digest = settings_digest
        self.failures: Counter[str] = Counter(failures or {})
        index: dict[str, int] = {}
        self.eq_paper = np.array([index.setdefault(str(p), len(index)) for p in papers], np.int64)
        #: paper ids in order of first appearance; ``eq_paper[i]`` indexes this list
        self.paper_ids: list[str] = list(index)

    def __len__(self) -> int:
        return len(self.crops)

    def __repr__(self) -> str:
        return f"BitmapCorpus({len(self)} crops, {self.num_papers} papers)"

    @property
    def num_papers(self) -> int:
        return len(self.paper_ids)

    @property
    def papers(self) -> list[str]:
        return [self.paper_ids[p] for p in self.eq_paper]

    def summary(self) -> dict[str, Any]:
        return {
            "equations": len(self),
            "papers": self.num_papers,
            "with_context": sum(bool(c.strip()) for c in self.contexts),
            "failures": dict(self.failures),
        }

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def from_records(
        cls,
        items: Iterable[EquationRecord | Failure],
        settings: BitmapSettings | None = None,
        limit: int | None = None,
        *,
        workers: int = 1,
        progress: Callable[[int], None] | None = None,
    ) -> BitmapCorpus:
        """Render at most ``limit`` LaTeX equation records; failures are counted, not kept."""
        settings = settings or BitmapSettings()
        failures: Counter[str] = Counter()
        records: list[EquationRecord] = []
        for item in items:
            if isinstance(item, Failure):
                failures[f"{item.stage}/{item.reason}"] += 1
            elif not item.latex:
                failures["render/no-latex"] += 1
            else:
                records.append(item)
                if limit is not None and len(records) >= limit:
                    break
        chunks = [
            ([r.latex or "" for r in records[i : i + _CHUNK]], settings)
            for i in range(0, len(records), _CHUNK)
        ]
        results: list[np.ndarray | str] = []
        if workers > 1 and len(chunks) > 1:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                for part in pool.map(_render_chunk, chunks):
                    results.extend(part)
                    if progress is not None:
                        progress(len(part))
        else:
            for chunk in chunks:
                part = _render_chunk(chunk)
                results.extend(part)
                if progress is not None:
                    progress(len(part))
        kept = [(r, c) for r, c in zip(records, results, strict=True) if isinstance(c, np.ndarray)]
        for result in results:
            if isinstance(result, str):
                failures[f"render/{result}"] += 1
        shape = (0, settings.crop_height, settings.crop_width)
        crops = np.stack([c for _, c in kept]) if kept else np.zeros(shape, np.uint8)
        corpus = cls(
            crops,
            [r.eq_id for r, _ in kept],
            [r.doc_id or r.eq_id for r, _ in kept],
            [r.latex or "" for r, _ in kept],
            [r.context or "" for r, _ in kept],
            settings_digest=settings_hash(settings),
            failures=failures,
        )
        logger.info("%r; dropped %d", corpus, sum(failures.values()))
        return corpus

    @classmethod
    def from_sources(
        cls,
        paths: Sequence[str],
        fmt: str | None = None,
        limit: int | None = None,
        settings: BitmapSettings | None = None,
        *,
        workers: int = 1,
        progress: Callable[[int], None] | None = None,
    ) -> BitmapCorpus:
        """Extract and render ``paths`` (see :meth:`from_records`)."""
        from mathsearch.indexer.extract import extract

        items = extract(list(paths), fmt)
        return cls.from_records(items, settings, limit, workers=workers, progress=progress)

    @classmethod
    def cached(
        cls,
        paths: Sequence[str],
        fmt: str | None,
        cache_dir: str | os.PathLike[str] | None,
        limit: int | None = None,
        settings: BitmapSettings | None = None,
        *,
        workers: int = 1,
        progress: Callable[[int], None] | None = None,
    ) -> BitmapCorpus:
        """:meth:`from_sources`, through ``cache_dir/bitmaps-<key>.npz`` (an empty corpus is not
        kept: missing sources or a renderer that failed are tried again next time); ``cache_dir``
        None renders without a cache.

        Raises:
            BitmapCorpusError: a source that does not exist.
        """
        missing = [str(p) for p in paths if not Path(p).exists()]
        if missing:
            raise BitmapCorpusError(f"no such source: {', '.join(missing)}")
        settings = settings or BitmapSettings()
        if cache_dir is None:
            return cls.from_sources(paths, fmt, limit, settings, workers=workers, progress=progress)
        path = Path(cache_dir) / f"bitmaps-{cache_key(paths, fmt, limit, settings)[:20]}.npz"
        if path.is_file():
            try:
                corpus = cls.load(path)
                logger.info("loaded %r from %s", corpus, path)
                return corpus
            except BitmapCorpusError as exc:
                logger.warning("rendering again: %s", exc)
        corpus = cls.from_sources(paths, fmt, limit, settings, workers=workers, progress=progress)
        if len(corpus):
            corpus.save(path)
        return corpus

    # -- splitting ----------------------------------------------------------------------------

    def subset(self, indices: Sequence[int] | np.ndarray) -> BitmapCorpus:
        """The equations at ``indices`` (in that order)."""
        idx = np.asarray(indices, dtype=np.int64)
        return BitmapCorpus(
            self.crops[idx],
            [self.eq_ids[i] for i in idx],
            [self.paper_ids[self.eq_paper[i]] for i in idx],
            [self.latex[i] for i in idx],
            [self.contexts[i] for i in idx],
            settings_digest=self.settings_digest,
            failures=self.failures,
        )

    def split_by_paper(
        self, test_fraction: float, seed: int = 0
    ) -> tuple[BitmapCorpus, BitmapCorpus]:
        """Train and test corpora over disjoint random papers (at least one paper each).

        Raises:
            BitmapCorpusError: fewer than two papers, or a fraction outside (0, 1).
        """
        if not 0.0 < test_fraction < 1.0:
            raise BitmapCorpusError(f"test_fraction must be in (0, 1), not {test_fraction}")
        if self.num_papers < 2:
            raise BitmapCorpusError(f"cannot split {self.num_papers} paper(s) by paper")
        order = np.random.default_rng(seed).permutation(self.num_papers)
        n_test = min(self.num_papers - 1, max(1, round(test_fraction * self.num_papers)))
        test_papers = np.zeros(self.num_papers, dtype=bool)
        test_papers[order[:n_test]] = True
        is_test = test_papers[self.eq_paper]
        return self.subset(np.flatnonzero(~is_test)), self.subset(np.flatnonzero(is_test))

    def split_on(self, test_papers: Collection[str]) -> tuple[BitmapCorpus, BitmapCorpus]:
        """Train and test corpora: the test side holds the equations of ``test_papers`` (e.g.
        the papers a teacher model never trained on), the train side every other paper.

        Raises:
            BitmapCorpusError: no equation on one of the sides.
        """
        wanted = set(test_papers)
        is_test = np.array([p in wanted for p in self.paper_ids], dtype=bool)[self.eq_paper]
        if is_test.all() or not is_test.any():
            raise BitmapCorpusError(
                f"{int(is_test.sum())} of {len(self)} equations are of the {len(wanted)} test "
                "papers: need some on both sides"
            )
        return self.subset(np.flatnonzero(~is_test)), self.subset(np.flatnonzero(is_test))

    # -- storage ------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the corpus atomically to ``path`` (``.npz``, no pickle)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = {
            "format": CACHE_FORMAT,
            "settings": self.settings_digest,
            "eq_ids": self.eq_ids,
            "papers": self.paper_ids,
            "latex": self.latex,
            "contexts": self.contexts,
            "failures": dict(self.failures),
        }
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez_compressed(
            tmp, header=np.array(json.dumps(header)), crops=self.crops, eq_paper=self.eq_paper
        )
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> BitmapCorpus:
        """Read a corpus written by :meth:`save`.

        Raises:
            BitmapCorpusError: unreadable file or another format version.
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                header = json.loads(str(data["header"]))
                crops, eq_paper = data["crops"], data["eq_paper"]
        except (OSError, ValueError, KeyError) as exc:
            raise BitmapCorpusError(f"cannot read the bitmap corpus {path}: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != CACHE_FORMAT:
            raise BitmapCorpusError(f"{path}: not a bitmap corpus of format {CACHE_FORMAT}")
        papers = header["papers"]
        return cls(
            crops,
            header["eq_ids"],
            [papers[p] for p in eq_paper.tolist()],
            header["latex"],
            header["contexts"],
            settings_digest=header["settings"],
            failures=header["failures"],
        )


def cache_key(
    paths: Sequence[str], fmt: str | None, limit: int | None, settings: BitmapSettings
) -> str:
    """SHA-256 over the cache format, render settings, format, limit and sources (path, size,
    content hash), so an edited source or other settings render again."""
    sources = source_stats(paths)
    material = {
        "format": CACHE_FORMAT,
        "settings": asdict(settings),
        "fmt": fmt,
        "limit": limit,
        "sources": sources,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()
