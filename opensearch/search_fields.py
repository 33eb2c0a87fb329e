"""Which fields of an index the query builders and the
:class:`~mathsearch.opensearch.searcher.Searcher` use.

The six search modes are the same for every index; only the field names differ. The equation
index (the default, :data:`EQUATION_FIELDS`) matches the query's math tokens against
``math_tokens`` and its words against ``context``; the figures index (:data:`FIGURE_FIELDS`)
matches the query's tokens against ``caption`` and ``mentions`` and has no separate context
field (words go to the text fields too).

Example::

    searcher = Searcher(client, "mathsearch-figures", encoder=figure_queries,
                        fields=FIGURE_FIELDS)
    body = bm25_query(["gauge", "field"], fields=FIGURE_FIELDS)
"""

from __future__ import annotations

from dataclasses import dataclass

from mathsearch.core.errors import QueryError

#: Fields a filter may name (keyword / numeric / date fields of the equation index).
FILTER_FIELDS = ("doc_id", "eq_id", "section", "symbols", "keywords", "model_versions", "source")
RANGE_FIELDS = ("position", "indexed_at")
#: The type of each field a range may name (both indexes map them alike): its bounds are
#: checked against it before a request is sent.
RANGE_TYPES = {"position": "integer", "indexed_at": "date"}
#: Boost of the ``canon_tokens`` match (``term:`` and ``vars:`` tokens: partial credit).
CANONICAL_BOOST = 10.0
#: Constant score of a hit that shares the query's whole normal form (``form:``): the formulas
#: are equivalent, so it must outrank any near miss however many structural tokens that
#: shares (BM25 over an equation-sized query scores in the tens to hundreds); equivalent hits
#: are then ordered among themselves by the rest of the score.
EQUIVALENT_BOOST = 1000.0
#: What a hit of the equation index needs from its stored source.
EQUATION_SOURCE = ("eq_id", "doc_id", "latex", "position", "section", "math_tokens")


@dataclass(frozen=True)
class SearchFields:
    """The field names one index answers queries with.

    Attributes:
        text: text fields BM25 matches the query's tokens against (one ``match`` each;
            ``name^boost`` weighs one).
        context: the text field the query's words are matched against; ``None``: the words
            go to the ``text`` fields as well.
        vectors: the vector fields searched when a request names none (empty: the index's
            default from its ``_meta``, as for the equation index).
        id_field: the stored id of a hit (else the document ``_id``).
        display: the stored field shown as the hit's text (``Hit.latex``).
        tokens: the stored token string that matched tokens and highlights come from.
        canonical: the field of normal forms (``canon_tokens``); a hit sharing the query's
            ``form:`` token scores :data:`EQUIVALENT_BOOST` more (``None``: no such field).
        source: the stored fields a hit fetches.
        filter_fields / range_fields: the fields a filter may name.
    """

    text: tuple[str, ...] = ("math_tokens", f"canon_tokens^{CANONICAL_BOOST:g}")
    context: str | None = "context"
    vectors: tuple[str, ...] = ()
    id_field: str = "eq_id"
    display: str = "latex"
    tokens: str = "math_tokens"
    canonical: str | None = "canon_tokens"
    source: tuple[str, ...] = EQUATION_SOURCE
    filter_fields: tuple[str, ...] = FILTER_FIELDS
    range_fields: tuple[str, ...] = RANGE_FIELDS

    def __post_init__(self) -> None:
        if not self.text:
            raise QueryError("SearchFields needs at least one text field")
        for name in self.vectors:
            if not name.startswith("vec_"):
                raise QueryError(f"vector field {name!r} must look like vec_<encoder>_<version>")


#: The equation index (``<prefix>-equations``).
EQUATION_FIELDS = SearchFields()

#: The figures index (:mod:`mathsearch.opensearch.figure_index`): captions and mentions, one
#: figure vector field (the shipped figure model's; ``figures search`` puts its ``--model``'s
#: field here: :attr:`FigureQueryEncoder.vector_field`), figures identified by ``fig_id``.
FIGURE_FIELDS = SearchFields(
    text=("caption", "mentions"),
    context=None,
    vectors=("vec_figure_v2",),
    id_field="fig_id",
    display="caption",
    tokens="caption",
    canonical=None,
    source=("fig_id", "doc_id", "position", "label", "caption", "mentions"),
    filter_fields=("doc_id", "fig_id", "label", "has_image", "model_versions", "source"),
    range_fields=("position", "indexed_at"),
)
