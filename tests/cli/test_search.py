"""``mathsearch search`` without a cluster: its text output and the checks made before any
request (the searches themselves are in tests/opensearch/test_searcher.py)."""

from __future__ import annotations

import json
import re

import pytest

from mathsearch.cli.main import main
from mathsearch.cli.search import format_response
from mathsearch.opensearch.results import DocumentGroup, Hit, ScoreBreakdown, SearchResponse

from .test_main import _one_error_line, dead_node  # noqa: F401 - pytest finds fixtures by name

SCORE = 0.9999999999989999


def _response(*, grouped: bool = False) -> SearchResponse:
    explanation = ScoreBreakdown(
        bm25=12.345678901234, bm25_normalized=SCORE, knn=0.87654321987, knn_normalized=0.5,
        score=SCORE, formula="arithmetic_mean(min_max(bm25), min_max(knn); weights 0.6, 0.4)",
    )  # fmt: skip
    hit = Hit(rank=1, eq_id="0301001#3", doc_id="0301001", score=SCORE, latex="x^2",
              explanation=explanation)  # fmt: skip
    return SearchResponse(
        mode="fusion",
        k=10,
        vector_field="vec_gcn_v10",
        took_ms=12.3456,
        hits=[hit],
        groups=[DocumentGroup(rank=1, doc_id="0301001", score=SCORE, hits=[hit])]
        if grouped
        else None,
        parameters={"k": 10, "alpha": 0.30000000000000004, "weights": [1 / 3, 2 / 3]},
    )


@pytest.mark.parametrize("grouped", [False, True], ids=["hits", "groups"])
def test_text_output_rounds_scores_and_json_keeps_them_whole(grouped: bool) -> None:
    """Scores printed as ``0.9999999999989999``."""
    response = _response(grouped=grouped)
    text = format_response(response, explain=True)
    assert "1.0000" in text and "0.99999" not in text and "12.3457" in text
    assert "alpha=0.3," in text and "weights=[0.3333, 0.6667]" in text
    # every number of the text has at most 4 decimals
    assert not re.search(r"\d\.\d{5,}", text), text
    data = json.loads(json.dumps(response.to_dict()))
    assert data["hits"][0]["score"] == SCORE
    assert data["hits"][0]["explanation"]["bm25"] == 12.345678901234
    assert data["parameters"]["alpha"] == 0.30000000000000004


def test_a_bad_range_is_refused_before_the_node_sees_it(
    dead_node: str,  # noqa: F811 - the fixture
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--range position=a:b`` reached the node, which said ``For input string: "a"``."""
    for bound, words in (
        ("position=a:b", "range on position: 'a' is not an integer"),
        ("position=0:99999999999", "range on position: 99999999999 is out of the integer range"),
        ("indexed_at=yesterday:", "range on indexed_at: 'yesterday' is not a date"),
    ):
        code = main(["search", "x^2", "--mode", "bm25", "--range", bound])
        line = _one_error_line(capsys.readouterr())
        assert code == 1
        assert words in line and "does not answer" not in line
    # good bounds pass the check and reach the (unreachable) node
    assert main(["search", "x^2", "--mode", "bm25", "--range", "indexed_at=now-7d:"]) == 1
    assert "does not answer" in _one_error_line(capsys.readouterr())
