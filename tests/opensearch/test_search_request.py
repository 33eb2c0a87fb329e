"""mathsearch.opensearch.search_request: the request's enums accept their names as strings."""

from __future__ import annotations

import pytest

from mathsearch.core.errors import QueryError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_request import SearchRequest


def test_enum_names_given_as_strings_become_the_enums() -> None:
    request = SearchRequest(r"x^{-1}", mode="rrf", normalization="l2", combination="harmonic_mean")
    assert request.mode is Mode.RRF
    assert request.normalization is Normalization.L2
    assert request.combination is Combination.HARMONIC_MEAN
    assert request.parameters()["rank_constant"] == 60
    assert SearchRequest("x", mode=Mode.KNN).mode is Mode.KNN


def test_an_unknown_mode_is_a_query_error_that_lists_the_modes() -> None:
    with pytest.raises(QueryError, match=r"mode must be one of knn, bm25.*not 'fast'"):
        SearchRequest("x", mode="fast")


def test_excluded_ids_are_a_must_not_filter_beside_the_others() -> None:
    from mathsearch.opensearch.queries import Filters

    filters = Filters(doc_ids=("d",), exclude_ids=("d#3",))
    assert filters and Filters(exclude_ids=("x",))
    assert filters.clauses() == [
        {"terms": {"doc_id": ["d"]}},
        {"bool": {"must_not": [{"ids": {"values": ["d#3"]}}]}},
    ]
