"""Triplet sampling for the contextual similarity task (KDD 2020 seed, section 4.2).

For obtaining positive examples the seed says:

1. "sample a paper uniformly at random and select an expression from this paper uniformly at
   random" (the anchor; here from the papers with at least two equations),
2. "randomly select whether we sample from the same section, same paper or along a citation"
   (the ``mixture`` weights),
3. "sample a positive example using that method. When we cannot find a positive example using
   that method, we jump back to (1)."

and for negatives: "we sample a paper uniformly at random and select an expression from this
paper uniformly at random" (any paper, the anchor's included: the labels are weak).

A positive is never the anchor itself. "Same paper" draws uniformly from the other equations of
the anchor's paper, "same section" from the other equations of its section, and "citation" first
a paper uniformly among the papers that cite or are cited by the anchor's paper, then an equation
of that paper uniformly. An anchor whose section is unknown ("", e.g. all hep-th records) has the
whole paper as its section: the same-section positive falls back to a same-paper one and is
reported with kind ``paper``.

Sampling is vectorised: rounds of candidate anchors and methods are drawn at once and the
candidates without a positive are dropped, which is the same as jumping back to (1) for each.
Everything comes from one :class:`numpy.random.Generator`, so a seed fixes the triplets.

For evaluation, :func:`holdout_triplets` draws negatives outside ``P(anchor)`` (another paper,
not linked by a citation), as the ranking score of section 5 counts only such triplets.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mathsearch.encoders.corpus import EquationCorpus

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_MIXTURE",
    "KINDS",
    "SamplerError",
    "TripletArrays",
    "TripletSampler",
    "holdout_triplets",
]

#: The positive methods, in the order of the ``kind`` codes of :class:`TripletArrays`.
KINDS = ("section", "paper", "citation")
#: "randomly select": each method equally likely (unavailable ones are jumped back from).
DEFAULT_MIXTURE: dict[str, float] = {"section": 1.0, "paper": 1.0, "citation": 1.0}
_NEGATIVE_MODES = ("uniform", "unrelated")
_MAX_ROUND = 1 << 20  # candidate anchors per round (bounds the memory of big pools)


class SamplerError(ValueError):
    """Triplets cannot be sampled from this corpus with these settings."""


@dataclass
class TripletArrays:
    """``n`` triplets as index arrays into the corpus, with the method of each positive."""

    anchors: np.ndarray
    positives: np.ndarray
    negatives: np.ndarray
    kinds: np.ndarray  # index into KINDS

    def __len__(self) -> int:
        return int(self.anchors.shape[0])

    def as_tuples(self) -> list[tuple[int, int, int]]:
        return list(
            zip(
                self.anchors.tolist(), self.positives.tolist(), self.negatives.tolist(), strict=True
            )
        )

    def kind_counts(self) -> dict[str, int]:
        counts = np.bincount(self.kinds, minlength=len(KINDS))
        return {kind: int(c) for kind, c in zip(KINDS, counts, strict=True)}


def _groups(labels: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR grouping: (members sorted by label, start of each label, rank of each item)."""
    members = np.argsort(labels, kind="stable")
    sizes = np.bincount(labels, minlength=count)
    starts = np.concatenate(([0], np.cumsum(sizes)))
    rank = np.empty_like(members)
    rank[members] = np.arange(members.shape[0]) - starts[labels[members]]
    return members, starts, rank


class TripletSampler:
    """Anchor / positive / negative equation indices of a corpus (see the module docstring).

    Args:
        corpus: the equations.
        mixture: relative weights of the positive methods ``section``, ``paper``, ``citation``
            (missing keys weigh 0; default: equal).
        seed: seed of the generator (an int or a sequence of ints).
        negatives: ``"uniform"`` (the seed: any paper) or ``"unrelated"`` (redrawn until the
            negative is outside ``P(anchor)``: another paper, no citation link).

    Raises:
        SamplerError: unknown method, negative weights, or no method can give a positive.
    """

    def __init__(
        self,
        corpus: EquationCorpus,
        mixture: Mapping[str, float] | None = None,
        seed: int | list[int] | None = 0,
        *,
        negatives: str = "uniform",
    ) -> None:
        mixture = dict(DEFAULT_MIXTURE if mixture is None else mixture)
        unknown = set(mixture) - set(KINDS)
        if unknown:
            raise SamplerError(f"unknown positive method(s) {sorted(unknown)}; use {KINDS}")
        weights = np.array([float(mixture.get(kind, 0.0)) for kind in KINDS])
        if (weights < 0).any() or not np.isfinite(weights).all():
            raise SamplerError(f"mixture weights must be finite and >= 0, not {mixture}")
        if negatives not in _NEGATIVE_MODES:
            raise SamplerError(f"negatives must be one of {_NEGATIVE_MODES}, not {negatives!r}")
        self.corpus = corpus
        self.negatives = negatives
        self.rng = np.random.default_rng(seed)

        n_papers = corpus.num_papers
        self._paper_members, self._paper_start, self._paper_rank = _groups(
            corpus.eq_paper, n_papers
        )
        self._paper_size = np.diff(self._paper_start)
        self._section_members, self._section_start, self._section_rank = _groups(
            corpus.eq_section, len(corpus.section_keys)
        )
        self._section_size = np.diff(self._section_start)
        self._section_known = np.array([bool(t) for _, t in corpus.section_keys], dtype=bool)
        neighbours = corpus.citation_neighbours()
        self._cite_size = np.array([len(n) for n in neighbours], dtype=np.int64)
        self._cite_start = np.concatenate(([0], np.cumsum(self._cite_size))).astype(np.int64)
        self._cite_list = np.array([q for n in neighbours for q in n], dtype=np.int64)
        #: papers anchors are drawn from: at least two equations
        self.anchor_papers = np.flatnonzero(self._paper_size >= 2)
        #: :meth:`restrict_anchors`: the subset anchors come from for now (None: all)
        self._anchor_subset: np.ndarray | None = None

        feasible = np.array(
            [
                (self._section_size[corpus.eq_section] >= 2).any(),
                self.anchor_papers.size > 0,
                (self._cite_size[self.anchor_papers] > 0).any(),
            ]
        )
        if self.anchor_papers.size == 0:
            raise SamplerError("no paper has two or more equations: no anchor can be drawn")
        if not (weights * feasible).sum() > 0:
            raise SamplerError(
                f"no positive method with weight > 0 is possible on this corpus {mixture}"
            )
        self.mixture = weights / weights.sum()
        if negatives == "unrelated" and n_papers < 2:
            raise SamplerError("unrelated negatives need at least two papers")

    # -- state ------------------------------------------------------------------------------

    def reseed(self, seed: int | list[int]) -> None:
        """Restart the generator from ``seed``."""
        self.rng = np.random.default_rng(seed)

    def get_state(self) -> Mapping[str, Any]:
        """The generator state (a JSON-able dict), for checkpoints."""
        return self.rng.bit_generator.state

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = state

    def restrict_anchors(self, papers: np.ndarray | None) -> int:
        """Draw anchors only from ``papers`` (those with two or more equations) until called
        again; None lifts the restriction. Returns how many anchor papers that leaves (0: the
        restriction is not applied). Positives and negatives are drawn as before."""
        if papers is None:
            self._anchor_subset = None
            return int(self.anchor_papers.size)
        subset = np.unique(np.asarray(papers, dtype=np.int64))
        subset = subset[(subset >= 0) & (subset < self.corpus.num_papers)]
        subset = subset[self._paper_size[subset] >= 2]
        self._anchor_subset = subset if subset.size else None
        return int(subset.size)

    # -- sampling ---------------------------------------------------------------------------

    def _uniform_index(self, sizes: np.ndarray) -> np.ndarray:
        """One uniform integer in ``[0, size)`` per entry of ``sizes`` (all > 0)."""
        return np.minimum((self.rng.random(sizes.shape[0]) * sizes).astype(np.int64), sizes - 1)

    def _equation_of(self, papers: np.ndarray) -> np.ndarray:
        """A uniformly drawn equation of each paper."""
        offset = self._uniform_index(self._paper_size[papers])
        return self._paper_members[self._paper_start[papers] + offset]

    def _other_member(
        self,
        anchors: np.ndarray,
        groups: np.ndarray,
        members: np.ndarray,
        starts: np.ndarray,
        rank: np.ndarray,
    ) -> np.ndarray:
        """A uniform member of each anchor's group other than the anchor (group size >= 2)."""
        sizes = starts[groups + 1] - starts[groups]
        j = self._uniform_index(sizes - 1)
        j = j + (j >= rank[anchors])
        return members[starts[groups] + j]

    def _round(self, m: int, per_paper: int = 1) -> TripletArrays:
        """``m`` candidate anchors; returns the ones that found a positive (no negatives yet)."""
        corpus = self.corpus
        pool = self.anchor_papers if self._anchor_subset is None else self._anchor_subset
        draws = self.rng.integers(0, pool.size, -(-m // per_paper))
        papers = np.repeat(pool[draws], per_paper)[:m]
        anchors = self._equation_of(papers)
        kinds = self.rng.choice(len(KINDS), size=m, p=self.mixture)
        positives = np.full(m, -1, dtype=np.int64)

        sec = kinds == 0
        if sec.any():
            groups = corpus.eq_section[anchors[sec]]
            ok = self._section_size[groups] >= 2
            idx = np.flatnonzero(sec)[ok]
            positives[idx] = self._other_member(
                anchors[idx],
                groups[ok],
                self._section_members,
                self._section_start,
                self._section_rank,
            )
        pap = kinds == 1
        if pap.any():
            idx = np.flatnonzero(pap)
            positives[idx] = self._other_member(
                anchors[idx],
                papers[idx],
                self._paper_members,
                self._paper_start,
                self._paper_rank,
            )
        cit = kinds == 2
        if cit.any():
            idx = np.flatnonzero(cit)
            idx = idx[self._cite_size[papers[idx]] > 0]
            if idx.size:
                p = papers[idx]
                q = self._cite_list[self._cite_start[p] + self._uniform_index(self._cite_size[p])]
                positives[idx] = self._equation_of(q)

        if per_paper > 1:  # keep every paper's K pairs: a same-paper positive instead
            idx = np.flatnonzero(positives < 0)
            positives[idx] = self._other_member(
                anchors[idx], papers[idx], self._paper_members, self._paper_start, self._paper_rank
            )
            kinds[idx] = 1
        found = positives >= 0
        anchors, positives, kinds = anchors[found], positives[found], kinds[found]
        # A same-section positive of an anchor with an unknown section is a same-paper one.
        unknown = (kinds == 0) & ~self._section_known[corpus.eq_section[anchors]]
        kinds[unknown] = 1
        empty = np.empty(0, dtype=np.int64)
        return TripletArrays(anchors, positives, empty, kinds)

    def _negatives(self, anchors: np.ndarray) -> np.ndarray:
        n_papers = self.corpus.num_papers
        papers = self.rng.integers(0, n_papers, int(anchors.shape[0]))
        if self.negatives == "unrelated":
            anchor_papers = self.corpus.eq_paper[anchors]
            for _ in range(1000):
                bad = papers == anchor_papers
                if self._cite_list.size:
                    bad |= self._linked(anchor_papers, papers)
                if not bad.any():
                    break
                papers[bad] = self.rng.integers(0, n_papers, int(bad.sum()))
            else:
                raise SamplerError("could not draw unrelated negatives (every paper is linked)")
        return self._equation_of(papers)

    def _linked(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Whether papers ``a[i]`` and ``b[i]`` share a citation edge."""
        out = np.zeros(a.shape[0], dtype=bool)
        for i in np.flatnonzero(self._cite_size[a] > 0):
            start = self._cite_start[a[i]]
            out[i] = b[i] in self._cite_list[start : start + self._cite_size[a[i]]]
        return out

    def sample_arrays(self, n: int, per_paper: int = 1) -> TripletArrays:
        """``n`` triplets as arrays, with the method that found each positive.

        ``per_paper``: draw each anchor paper once for ``per_paper`` consecutive triplets
        (each with its own uniformly drawn anchor and positive; an anchor without a positive
        of the drawn kind takes a same-paper one instead of a new anchor, so every paper keeps
        its pairs); 1: one draw per triplet.
        """
        if n < 0 or per_paper < 1:
            raise SamplerError(f"cannot sample {n} triplets, {per_paper} per paper")
        parts: list[TripletArrays] = []
        have = 0
        rounds = 0
        while have < n:
            rounds += 1
            if rounds > 10_000:
                raise SamplerError("positives are too rare: 10,000 sampling rounds were not enough")
            part = self._round(min(max(2 * (n - have), 16), _MAX_ROUND), int(per_paper))
            parts.append(part)
            have += len(part)
        anchors = np.concatenate([p.anchors for p in parts])[:n] if parts else np.empty(0, int)
        positives = np.concatenate([p.positives for p in parts])[:n] if parts else anchors
        kinds = np.concatenate([p.kinds for p in parts])[:n] if parts else anchors
        return TripletArrays(anchors, positives, self._negatives(anchors), kinds)

    def sample(self, n: int) -> list[tuple[int, int, int]]:
        """``n`` triplets ``(anchor, positive, negative)`` of corpus equation indices."""
        return self.sample_arrays(n).as_tuples()


def holdout_triplets(
    corpus: EquationCorpus,
    n: int,
    seed: int | list[int] = 0,
    mixture: Mapping[str, float] | None = None,
) -> list[tuple[int, int, int]]:
    """``n`` evaluation triplets: seed sampling with negatives outside ``P(anchor)``.

    The ranking score (seed, section 5, eq. 3) counts a triplet only when ``x2 in P(x1)`` and
    ``x3 not in P(x1)``; these triplets all qualify.
    """
    sampler = TripletSampler(corpus, mixture, seed, negatives="unrelated")
    return sampler.sample(n)
