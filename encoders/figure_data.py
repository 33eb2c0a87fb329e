"""Figure corpus and weak supervision pairs (figure-embeddings seed, section 4).

A :class:`FigureCorpus` is the figures of LaTeX sources
(:func:`mathsearch.indexer.figures.extract_figures`)
with their featurised inputs. Its *article* is the first part of the document id: one folder of
the TeX Live documentation corpus (a package manual with its examples), or the file's stem (one
paper of the shared hep-th documents, named by its arXiv number).

Weak supervision: ``R_ij = 1`` when figures ``i`` and ``j`` are in the same article, ``0.6``
when one article cites the other, ``0`` for random pairs. "Cites" is real: article ``A`` cites
``B`` when ``A``'s sources name ``B`` in a ``\\cite`` key or a package-reference macro
(``\\pkg{B}``, ``\\sty{B}``, ``\\textsf{B}``, ...) or its arXiv id
(:func:`mathsearch.indexer.figures.document_references`), or the other way round. An arXiv id
names the article called by its number: ``2101.01234``, or ``hep-th/0301085`` when its archive
is the collection's (:data:`ARXIV_ARCHIVE`, the shared hep-th documents'; ``gr-qc/0301085`` is
another paper).

The image model is trained on visually similar pairs only (seed: SSIM >= 0.5 for positives,
< 0.3 for negatives, :func:`ssim`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mathsearch.indexer.figure_features import (
    FigureFeatures,
    FigureVocabulary,
    featurise_figures,
    figure_text,
    load_image,
    tokenize,
)
from mathsearch.indexer.figures import FigureRecord, extract_figures

logger = logging.getLogger(__name__)

__all__ = [
    "ARXIV_ARCHIVE",
    "CITING",
    "SAME",
    "FigureCorpus",
    "FigureDataError",
    "article_of",
    "ssim",
]

SAME, CITING, RANDOM = 1.0, 0.6, 0.0
#: The arXiv archive whose old-style ids (``hep-th/NNNNNNN``) name articles by their number.
ARXIV_ARCHIVE = "hep-th"


class FigureDataError(ValueError):
    """No usable figures, or a split that leaves a part empty."""


def article_of(doc_id: str) -> str:
    """The article of a document id: its first folder, or a top-level file's stem (so a paper
    named by its arXiv number is the article its citers name).

    >>> article_of("floatrow/doc/floatrow.tex"), article_of("paper"), article_of("0301085.tex")
    ('floatrow', 'paper', '0301085')
    """
    head, sep, _ = doc_id.partition("/")
    return head if sep or not head.endswith(".tex") else head[: -len(".tex")]


def ssim(a: np.ndarray, b: np.ndarray, window: int = 7) -> float:
    """Mean structural similarity (Wang et al. 2004) of two images in [0, 1] over
    ``window`` x ``window`` uniform windows (channels averaged)."""
    x, y = a.mean(axis=0).astype(np.float64), b.mean(axis=0).astype(np.float64)
    c1, c2 = 0.01**2, 0.03**2

    def box(img: np.ndarray) -> np.ndarray:
        s = np.cumsum(np.cumsum(np.pad(img, ((1, 0), (1, 0))), 0), 1)
        w = window
        return (s[w:, w:] - s[:-w, w:] - s[w:, :-w] + s[:-w, :-w]) / (w * w)

    mx, my = box(x), box(y)
    vx, vy, cxy = box(x * x) - mx * mx, box(y * y) - my * my, box(x * y) - mx * my
    value = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    return float(value.mean())


@dataclass
class FigureCorpus:
    """Figures with their featurised inputs, articles and the citation relation."""

    records: list[FigureRecord]
    vocabulary: FigureVocabulary
    features: FigureFeatures
    articles: list[str] = field(default_factory=list)
    cites: set[frozenset[str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.articles:
            self.articles = [article_of(r.doc_id) for r in self.records]
        if not self.cites:
            self.cites = citation_relation(self.records)
        self.article_array = np.asarray(self.articles)

    def __len__(self) -> int:
        return len(self.records)

    @staticmethod
    def extract(
        sources: Sequence[str | os.PathLike[str]], min_words: int = 5
    ) -> list[FigureRecord]:
        """Figures of ``sources`` with at least ``min_words`` text tokens (seed: 5)."""
        kept = []
        for item in extract_figures(sources):
            if (
                isinstance(item, FigureRecord)
                and len(tokenize(figure_text(item.to_item()))) >= min_words
            ):
                kept.append(item)
        if not kept:
            raise FigureDataError(
                f"no figures with {min_words}+ words in {list(map(str, sources))}"
            )
        return kept

    @classmethod
    def build(
        cls,
        records: list[FigureRecord],
        vocabulary: FigureVocabulary,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> FigureCorpus:
        """Featurise ``records`` (images cached as ``.npz`` in ``cache_dir``)."""
        images = load_images(records, vocabulary, cache_dir)
        features = featurise_figures([r.to_item() for r in records], vocabulary, images)
        return cls(records, vocabulary, features)

    def relation(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """``R_ij`` for index arrays (1 same article, 0.6 citing, 0 otherwise)."""
        a, b = self.article_array[i], self.article_array[j]
        cited = np.asarray([frozenset((x, y)) in self.cites for x, y in zip(a, b, strict=True)])
        return np.where(a == b, SAME, np.where(cited, CITING, RANDOM)).astype(np.float32)

    def split(self, fractions: tuple[float, float], seed: int) -> tuple[np.ndarray, ...]:
        """Figure indices of (train, validation, test) by article (:func:`split_articles`)."""
        return split_articles(self.articles, fractions, seed)

    def pairs(self, rows: np.ndarray, seed: int, limit: int = 100_000) -> np.ndarray:
        """Weak-supervision pairs within ``rows``: every same-article and citing pair (sampled
        down to ``limit / 2`` when more), plus as many random pairs of unrelated figures (the
        seed's negatives, ``R = 0``); ``(n, 2)`` int64."""
        rng = np.random.default_rng(seed)
        rows = np.asarray(rows)
        i, j = np.triu_indices(len(rows), k=1)
        i, j = rows[i], rows[j]
        related = self.relation(i, j) > 0
        positive = np.stack([i[related], j[related]], axis=1)
        if len(positive) > limit // 2:
            positive = positive[rng.choice(len(positive), limit // 2, replace=False)]
        negative = np.zeros((0, 2), dtype=np.int64)
        for _ in range(20):  # random pairs of unrelated figures (R = 0), as many as positives
            if len(negative) >= len(positive):
                break
            draw = rng.choice(rows, size=(4 * len(positive) + 8, 2))
            draw = draw[self.relation(draw[:, 0], draw[:, 1]) == 0]
            negative = np.concatenate([negative, draw])
        negative = negative[: len(positive)]
        out = np.concatenate([positive, negative])
        return out[rng.permutation(len(out))]

    def summary(self) -> dict[str, int]:
        return {
            "figures": len(self),
            "articles": len(set(self.articles)),
            "with_image": int(self.features.has_image.sum()),
            "citing_article_pairs": len(self.cites),
        }


def split_articles(
    articles: Sequence[str], fractions: tuple[float, float], seed: int
) -> tuple[np.ndarray, ...]:
    """Figure indices of (train, validation, test): ``fractions`` are the validation and test
    shares of the articles (a figure goes where its article goes).

    Raises:
        FigureDataError: too few articles for three non-empty parts.
    """
    names = sorted(set(articles))
    order = np.random.default_rng(seed).permutation(len(names))
    n_val = max(1, round(fractions[0] * len(names)))
    n_test = max(1, round(fractions[1] * len(names)))
    if n_val + n_test >= len(names):
        raise FigureDataError(f"{len(names)} articles are too few for a three-way split")
    part = {
        names[k]: 0 if n >= n_val + n_test else (1 if n < n_val else 2) for n, k in enumerate(order)
    }
    labels = np.asarray([part[a] for a in articles])
    return tuple(np.flatnonzero(labels == p) for p in range(3))


def citation_relation(
    records: Sequence[FigureRecord], arxiv_archive: str = ARXIV_ARCHIVE
) -> set[frozenset[str]]:
    """Article pairs where one names the other (module docstring)."""
    articles = {article_of(r.doc_id) for r in records}
    lower = {a.lower(): a for a in articles}
    out: set[frozenset[str]] = set()
    for record in records:
        source = article_of(record.doc_id)
        for name in record.references:
            archive, slash, number = name.partition("/")
            key = number if slash and archive.split(".")[0] == arxiv_archive else name
            target = lower.get(key.lower())
            if target is not None and target != source:
                out.add(frozenset((source, target)))
    return out


def _cache_key(records: Sequence[FigureRecord], vocabulary: FigureVocabulary) -> str:
    digest = hashlib.sha256(json.dumps(vocabulary.settings(), sort_keys=True).encode())
    for record in records:
        path = record.image or ""
        stamp = os.stat(path).st_mtime_ns if path and os.path.exists(path) else 0
        digest.update(f"{path}|{stamp}\n".encode())
    return digest.hexdigest()[:16]


def load_images(
    records: Sequence[FigureRecord],
    vocabulary: FigureVocabulary,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[np.ndarray | None]:
    """The image array of every record (None when it has none or it cannot be read)."""
    size, channels = vocabulary.image_size, vocabulary.channels
    cache = (
        Path(cache_dir) / f"figure-images-{_cache_key(records, vocabulary)}.npz"
        if cache_dir
        else None
    )
    if cache is not None and cache.is_file():
        data = np.load(cache)
        present = data["present"]
        return [data["images"][n] if present[n] else None for n in range(len(records))]
    images = [load_image(r.image, size, channels) for r in records]
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        stack = np.zeros((len(records), channels, size, size), dtype=np.float32)
        for n, image in enumerate(images):
            if image is not None:
                stack[n] = image
        np.savez_compressed(
            cache, images=stack, present=np.asarray([i is not None for i in images])
        )
    logger.info("read %d of %d figure images", sum(i is not None for i in images), len(images))
    return images
