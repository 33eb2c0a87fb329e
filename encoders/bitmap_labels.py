"""Weak labels of the bitmap CNN's multi-label proxy tasks (ECML 2019 sec. 4.2), torch-free.

* **symbols** ("LaTeX-Symbols as Labels"): the labels of an equation are the symbols of its LaTeX
  code (:func:`latex_symbols`): command names (``\\alpha``, ``\\int``, ``\\frac``), letters,
  digits and operator characters; layout-only tokens (``\\left``, ``\\label``, spacing, braces,
  ``&``, ``\\\\``) are no symbols. "The convolutional equation encoder has to learn to identify
  letters, numbers or symbols in an equation, a task loosely related to optical character
  recognition."
* **keywords** ("Abstract-Keywords as Labels"): the seed runs RAKE over the abstract of each
  publication. Our sources have no abstracts: .tex records carry ``context`` (the prose around
  the equation), hep-th record files none. The keywords of a paper are RAKE's
  (:func:`mathsearch.indexer.rake.rake_keywords`) over the distinct contexts of its equations - the
  nearest
  thing to an abstract here - and every equation of the paper gets them.

:class:`LabelVocabulary` keeps the labels seen in at least ``min_count`` training equations
(capped at ``max_labels``, most frequent first); unknown labels are dropped when encoding.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from mathsearch.indexer.rake import rake_keywords

logger = logging.getLogger(__name__)

__all__ = ["LabelVocabulary", "keyword_labels", "latex_symbols", "symbol_labels"]

_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[A-Za-z0-9]|[^\s{}A-Za-z0-9\\]")
#: Tokens that only lay out, label or space an equation (nothing one could see as a symbol).
_LAYOUT_TEXT = r"""\left \right \big \Big \bigg \Bigg \bigl \bigr \Bigl \Bigr \biggl \biggr
    \Biggl \Biggr \label \nonumber \notag \nn \displaystyle \textstyle \scriptstyle \limits
    \nolimits \quad
    \qquad \, \; \: \! \  \\ & \hspace \vspace \mbox \hbox \text \textrm \rm \it \bf \cal \mathrm
    \mathit \mathbf \mathcal \mathbb \mathsf \boldsymbol \begin \end \tag \lefteqn \phantom
    \hphantom \vphantom \array \eqno \cr \noindent \mathstrut \strut ~ $ _ ^"""
_LAYOUT = frozenset(_LAYOUT_TEXT.split())


def latex_symbols(latex: str) -> set[str]:
    """The symbols of one equation's LaTeX (module docstring).

    >>> sorted(latex_symbols(r"\\frac{\\alpha}{2} \\left( x_1 \\right) \\label{a}"))
    ['(', ')', '1', '2', '\\\\alpha', '\\\\frac', 'x']
    """
    body = re.sub(r"\\(?:label|tag|ref|eqref)\s*\{[^{}]*\}", " ", latex or "")
    return {t for t in _TOKEN.findall(body) if t not in _LAYOUT}


def symbol_labels(latexes: Iterable[str]) -> list[set[str]]:
    """:func:`latex_symbols` of every equation."""
    return [latex_symbols(latex) for latex in latexes]


def keyword_labels(
    papers: Sequence[str], contexts: Sequence[str], top: int = 10, max_words: int = 3
) -> list[set[str]]:
    """RAKE keywords of each equation's paper (the paper's distinct contexts joined).

    Args:
        papers: paper id of each equation; contexts: its text ("" when none).
        top: keywords kept per paper (10); max_words: longest keyword (3 words).
    """
    texts: dict[str, dict[str, None]] = {}
    for paper, context in zip(papers, contexts, strict=True):
        if context.strip():
            texts.setdefault(paper, {})[context] = None
    keywords = {
        paper: {k for k, _ in rake_keywords("\n.\n".join(parts), top, max_words=max_words)}
        for paper, parts in texts.items()
    }
    return [set(keywords.get(paper, ())) for paper in papers]


class LabelVocabulary:
    """Labels <-> ids of one proxy task.

    Args:
        labels: the label strings, in id order (unique).

    Example:
        >>> vocab = LabelVocabulary.build([{"x", "y"}, {"x"}], min_count=2)
        >>> vocab.labels, [ids.tolist() for ids in vocab.encode([{"x", "z"}])]
        (['x'], [[0]])
    """

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = [str(label) for label in labels]
        self.index = {label: i for i, label in enumerate(self.labels)}
        if len(self.index) != len(self.labels):
            raise ValueError("labels must be unique")

    def __len__(self) -> int:
        return len(self.labels)

    @classmethod
    def build(
        cls, label_sets: Iterable[set[str]], min_count: int = 2, max_labels: int = 5000
    ) -> LabelVocabulary:
        """Labels of at least ``min_count`` equations, at most ``max_labels``, most frequent
        first (ties alphabetical)."""
        counts: Counter[str] = Counter()
        for labels in label_sets:
            counts.update(labels)
        ranked = sorted((-n, label) for label, n in counts.items() if n >= min_count)
        return cls([label for _, label in ranked[:max_labels]])

    def encode(self, label_sets: Iterable[set[str]]) -> list[np.ndarray]:
        """Sorted int64 label ids of each set (labels outside the vocabulary dropped)."""
        return [
            np.array(sorted(self.index[x] for x in labels if x in self.index), dtype=np.int64)
            for labels in label_sets
        ]

    @property
    def content_hash(self) -> str:
        return hashlib.sha256("\n".join(self.labels).encode("utf-8")).hexdigest()
