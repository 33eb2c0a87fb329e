"""What one search asks for: the query, the mode and every parameter that shapes the ranking.

The vectors: ``encoders`` (families or ``.onnx`` paths, whose cards name their fields), else
``vector_fields``, else ``vector_field``, else the index's default. With several fields
``weights`` gives each subquery's share, ``[bm25, field 1, ..., field n]`` (sum 1); without it
BM25 gets ``1 - alpha`` and each field ``alpha / n``. ``max_df`` and ``max_terms`` choose the
query tokens BM25 gets (:mod:`mathsearch.opensearch.token_stats`; None or 0: all).
``rerank`` (families or ``.onnx`` paths) re-ranks the top ``rerank_window`` hits of a hybrid
mode with those encoders' vectors, computed at query time, at share ``rerank_alpha``
(:mod:`mathsearch.opensearch.window_rerank`; ``rerank_window`` 0 or no ``rerank``: off).
``annotate`` False asks for the ranking alone: each hit's id, paper and score, without the
stored text, matched tokens and highlight a reader sees (a tuning or evaluation run reads
nothing else; the ranking is the same either way). ``wildcard_mode`` is the first stage of a
query with variables (:mod:`mathsearch.opensearch.wildcard_search`): ``bm25`` (the default: BM25
over the pattern's structure tokens, which measured the best recall on held-out papers), another
mode on the pattern made neutral, or ``same`` for the request's own ``mode``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.queries import NO_FILTERS, Filters, Mode

FUSION_SIDES = ("auto", "server", "client")
#: ``wildcard_mode`` values: a mode, or ``same`` (the request's ``mode``).
WILDCARD_SAME = "same"
WILDCARD_MODES = (*(mode.value for mode in Mode), WILDCARD_SAME)


@dataclass(frozen=True)
class SearchRequest:
    """Everything one search needs; the defaults are the seed's (window 100, rank constant 60)."""

    latex: str
    text: str = ""
    mode: Mode = Mode.FUSION
    k: int = 10
    alpha: float = 0.5
    window: int = 100
    depth: int = 100
    normalization: Normalization = Normalization.MIN_MAX
    combination: Combination = Combination.ARITHMETIC_MEAN
    rank_constant: int = 60
    filters: Filters = NO_FILTERS
    group: bool = False
    explain: bool = False
    vector_field: str | None = None
    fusion_side: str = "auto"
    max_df: float | None = None
    max_terms: int | None = None
    mathml: bool = False
    vector_fields: tuple[str, ...] = ()
    encoders: tuple[str, ...] = ()
    weights: tuple[float, ...] | None = None
    annotate: bool = True
    offset: int = 0
    rerank: tuple[str, ...] = ()
    rerank_window: int = 50
    rerank_alpha: float = 0.4
    #: False: the mode ranks ids alone, fetching no stored field (a second stage brings the
    #: window's with its own scores, :mod:`mathsearch.opensearch.window_rerank`)
    fetch_sources: bool = True
    #: the first stage of a wildcard search: a mode's value, or ``same`` (``mode``)
    wildcard_mode: str = Mode.BM25.value

    def __post_init__(self) -> None:
        """Accept the enums' names as strings (``mode="rrf"``); an unknown one is a QueryError."""
        for name, kind in (
            ("mode", Mode),
            ("normalization", Normalization),
            ("combination", Combination),
        ):
            value = getattr(self, name)
            if not isinstance(value, kind):
                try:
                    object.__setattr__(self, name, kind(value))
                except ValueError:
                    known = ", ".join(member.value for member in kind)
                    raise QueryError(f"{name} must be one of {known}, not {value!r}") from None
        if isinstance(self.wildcard_mode, Mode):  # a Mode stands for its value
            object.__setattr__(self, "wildcard_mode", self.wildcard_mode.value)

    def validate(self) -> None:
        """Raise :class:`QueryError` for parameters no mode accepts."""
        if not self.latex.strip() and not self.text.strip():
            raise QueryError("empty query: give LaTeX (and optionally words)")
        if not 1 <= self.k <= 10_000:
            raise QueryError(f"k must lie in [1, 10000], not {self.k}")
        if not 0 <= self.offset <= 10_000 - self.k:
            raise QueryError(f"offset must lie in [0, 10000 - k], not {self.offset}")
        last, ranked = self.offset + self.k, MODES[self.mode].parameters
        for name in ("window", "depth"):
            limit = getattr(self, name)
            if self.offset and name in ranked and last > limit:
                raise QueryError(
                    f"offset + k ({last}) must be <= {name} ({limit}): {self.mode.value} ranks "
                    f"the top {name} only; raise {name} (it changes the ranking of every page)"
                )
        if not 0.0 <= self.alpha <= 1.0:
            raise QueryError(f"alpha must lie in [0, 1], not {self.alpha}")
        if self.fusion_side not in FUSION_SIDES:
            raise QueryError(f"fusion side must be one of {FUSION_SIDES}, not {self.fusion_side}")
        if self.max_df is not None and not 0.0 < self.max_df <= 1.0:
            raise QueryError(f"max_df must lie in (0, 1], not {self.max_df}")
        if self.max_terms is not None and self.max_terms < 0:
            raise QueryError(f"max_terms must be >= 0 (0: every token), not {self.max_terms}")
        if not 0 <= self.rerank_window <= 1000:
            raise QueryError(
                f"rerank_window must lie in [0, 1000] (0: off), not {self.rerank_window}"
            )
        if not 0.0 <= self.rerank_alpha <= 1.0:
            raise QueryError(f"rerank_alpha must lie in [0, 1], not {self.rerank_alpha}")
        if any(not str(name).strip() for name in self.rerank):
            raise QueryError("rerank: name each encoder (a family or an .onnx path)")
        if self.wildcard_mode not in WILDCARD_MODES:
            known = ", ".join(WILDCARD_MODES)
            raise QueryError(f"wildcard_mode must be one of {known}, not {self.wildcard_mode!r}")
        if self.depth < self.k or self.window < self.k:
            raise QueryError(f"depth ({self.depth}) and window ({self.window}) must be >= k")
        if self.weights is not None:
            values = [float(w) for w in self.weights]
            if any(not 0.0 <= w <= 1.0 for w in values) or abs(sum(values) - 1.0) > 1e-6:
                raise QueryError(f"weights must lie in [0, 1] and sum to 1, not {values}")
            if len(values) < 2:
                raise QueryError("weights: one for BM25, then one per vector field")

    @property
    def wildcard_first_mode(self) -> Mode:
        """The mode of a wildcard search's first stage (``wildcard_mode`` resolved)."""
        return self.mode if self.wildcard_mode == WILDCARD_SAME else Mode(self.wildcard_mode)

    def parameters(self) -> dict[str, Any]:
        """The parameters that shaped the ranking (for reports and ``--json``): ``k``, the
        mode's own (:attr:`~mathsearch.opensearch.modes.base.SearchMode.parameters`), ``max_df``
        where it has a BM25 side, ``weights`` where it has a vector side."""
        spec = MODES[self.mode]
        out: dict[str, Any] = {"k": self.k}
        if self.offset:
            out["offset"] = self.offset
        for name in spec.parameters:
            value = getattr(self, name)
            out[name] = value.value if isinstance(value, Enum) else value
        if self.max_df is not None and spec.uses_bm25:
            out["max_df"] = self.max_df
        if self.max_terms and spec.uses_bm25:
            out["max_terms"] = self.max_terms
        if self.weights is not None and spec.uses_vectors:
            out["weights"] = list(self.weights)
        if self.reranks:
            out["rerank"] = list(self.rerank)
            out["rerank_window"] = self.rerank_window
            out["rerank_alpha"] = self.rerank_alpha
        return out

    @property
    def reranks(self) -> bool:
        """Whether a second stage re-ranks this request's window: ``rerank`` encoders, a window
        above 0 and a hybrid mode (one with both a BM25 and a vector side)."""
        return bool(self.rerank) and self.rerank_window > 0 and MODES[self.mode].hybrid
