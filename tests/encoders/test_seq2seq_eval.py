"""ExpEmb evaluation: score_k (seed eq. 1), the SymPy equivalence check, embedding algebra."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from mathsearch.encoders.seq2seq_eval import (
    SEED_ANALOGIES,
    analogies,
    bag_of_tokens,
    equivalent_prefix,
    score_k,
    semvec_score_k,
)
from mathsearch.indexer.semvec_prefix import read_semvec_prefix

SEMVEC = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "semvec"


def test_score_k_perfect_random_and_partial() -> None:
    labels = ["a"] * 3 + ["b"] * 3 + ["c"]
    clustered = np.array([[1, 0], [1, 0.01], [1, 0.02], [0, 1], [0.01, 1], [0.02, 1], [-1, -1]])
    result = score_k(clustered, labels, k=2)
    assert result == {"score": 1.0, "queries": 6, "skipped": 1}  # "c" alone: skipped
    # k=5: each query's 5 neighbours hold both other members of its class -> 2 / min(5, 2)
    assert score_k(clustered, labels, k=5)["score"] == 1.0
    crossed = np.array([[1, 0], [0, 1], [1, 0.01], [0.01, 1]])  # neighbours of the other class
    assert score_k(crossed, ["a", "a", "b", "b"], k=1)["score"] == 0.0
    assert score_k(crossed, ["a", "a", "b", "b"], k=2)["score"] == 0.5


def test_score_k_on_a_real_semvec_set() -> None:
    classes = read_semvec_prefix(SEMVEC / "oneVarPoly10-validationset.json.gz")
    vocabulary = sorted({t for c in classes for m in c.members for t in m})
    bag = semvec_score_k(bag_of_tokens(vocabulary), classes, k=5)
    rng = np.random.default_rng(0)

    def random_embed(sequences: Sequence[Sequence[str]]) -> np.ndarray:
        return rng.normal(size=(len(sequences), 16))

    chance = semvec_score_k(random_embed, classes, k=5)
    assert bag["classes"] == len(classes) and bag["queries"] > 0
    assert bag["score"] > chance["score"]


def test_equivalence_check() -> None:
    # a generous time limit: a busy CI machine must not turn a correct check into a timeout
    assert equivalent_prefix(
        ["pow", "sin", "x", "2"], ["+", "1", "*", "-1", "pow", "cos", "x", "2"], timeout=60.0
    )
    assert equivalent_prefix(["d", "x", "pow", "x", "2"], ["*", "2", "x"], timeout=60.0)
    assert not equivalent_prefix(["sin", "x"], ["cos", "x"])
    assert not equivalent_prefix(["+", "x"], ["x"])  # a broken tree is never equivalent


def test_analogies_find_the_algebraic_answer() -> None:
    rng = np.random.default_rng(0)
    table = {name: rng.normal(size=8) for name in ("sin", "cos", "cosh", "csc", "tan", "exp")}
    table = {name: v / np.linalg.norm(v) for name, v in table.items()}
    table["sec"] = table["cos"] - table["sin"] + table["csc"]  # the algebra holds exactly
    table["sinh"] = table["sin"] - table["cos"] + table["cosh"]

    def embed(sequences: Sequence[Sequence[str]]) -> np.ndarray:
        return np.stack([table[seq[0]] for seq in sequences])

    rows = SEED_ANALOGIES[:2]
    report = analogies(embed, [("tan", "x"), ("exp", "x")], rows, top_k=2)
    assert report["top2_accuracy"] == 1.0
    assert [r["expected_prefix"] for r in report["analogies"]] == ["sec x", "sinh x"]


@pytest.mark.parametrize("k", [0])
def test_score_k_rejects_bad_k(k: int) -> None:
    with pytest.raises(ValueError):
        score_k(np.eye(3), ["a", "a", "b"], k=k)


def test_score_k_with_eqnets_denominator_counts_the_query() -> None:
    """EQNET's knnstats (the seed's tables): |c| includes q, so a class of 3 scores <= 2/3."""
    vectors = np.array([[1.0, 0.0], [0.99, 0.1], [0.98, 0.2], [0.0, 1.0], [0.1, 0.99]])
    labels = ["a", "a", "a", "b", "b"]
    ours = score_k(vectors, labels, k=5)["score"]
    eqnet = score_k(vectors, labels, k=5, eqnet=True)["score"]
    assert ours == 1.0
    assert eqnet == pytest.approx((3 * 2 / 3 + 2 * 1 / 2) / 5)
