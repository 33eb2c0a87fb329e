"""The default model's held-out hep-th papers, rebuilt from its card's split."""

from __future__ import annotations

import pytest

from mathsearch.core.errors import EvaluationError
from mathsearch.evaluation.held_out import held_out_papers
from mathsearch.evaluation.relevance_sets import SHARED_DATA
from mathsearch.runtime.model_card import load_card
from mathsearch.runtime.settings import RuntimeSettings

pytestmark = pytest.mark.skipif(
    not (SHARED_DATA / "hepth2003" / "eqnarray.txt").is_file(), reason="needs ../shared/data"
)


def test_the_cards_split_is_rebuilt() -> None:
    card = load_card(RuntimeSettings.from_env().model)
    papers = held_out_papers()
    assert len(papers) == card.training["data"]["test"]["papers"] == 95
    assert len(set(papers)) == 95
    assert all(p[:7].isdigit() for p in papers)  # hep-th ids, some with a "_cleaned" suffix


def test_a_card_without_a_split_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import mathsearch.runtime.model_card

    real = mathsearch.runtime.model_card.load_card

    def no_split(path: object, verify_sha256: bool = True) -> object:
        card = real(path, verify_sha256)
        card.training = {}
        return card

    monkeypatch.setattr(mathsearch.runtime.model_card, "load_card", no_split)
    with pytest.raises(EvaluationError, match="records no paper split"):
        held_out_papers()


def test_validation_papers_are_neither_trained_nor_held_out() -> None:
    from mathsearch.evaluation.held_out import validation_papers

    card = load_card(RuntimeSettings.from_env().model)
    validation = validation_papers()
    assert card.training["split"]["validation"] == {"test_fraction": 0.1, "seed": 1}
    assert len(validation) == 38  # 0.1 of the 379 papers left after the 95 held out
    assert not set(validation) & set(held_out_papers())


@pytest.mark.parametrize("model", ["default", "gcn-v8", "gcn-v9", "gcn-v10", "gcn-v11"])
def test_the_shipped_cards_ranking_score_is_reproduced_on_its_hold_out(
    model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`eval ranking --onnx` of a shipped model (the default; gcn-v8, the opt-in large ensemble;
    gcn-v9 and gcn-v10, the opt-in gated towers; gcn-v11, the opt-in ensemble of gcn-v7's towers
    and gcn-v9's) on its card's held-out papers gives the card's
    hold-out ranking score (same split, same triplet seed), within the card's width."""
    import json
    import os
    from pathlib import Path

    from mathsearch.cli.main import main
    from mathsearch.runtime.embedders import shipped_or_path

    default = RuntimeSettings.from_env().model
    # gcn-v11 is superseded: in models/ of the checkout, not in the wheel
    path = default if model == "default" else Path(shipped_or_path(f"{model}.onnx"))
    card = load_card(path)
    cache = os.path.join(os.environ.get("MATHSEARCH_CACHE_DIR", "/tmp"), "test-corpus-cache")
    sources = [str(SHARED_DATA / "hepth2003" / n) for n in ("equation.txt", "eqnarray.txt")]
    code = main(
        ["eval", "ranking", *sources, "--format", "hepth", "--onnx", str(path),
         "--triplets", str(card.training["config"]["eval_triplets"]), "--cache-dir", cache,
         "--device", "cpu", "--no-progress", "--json"]
    )  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["test_papers"] == card.training["data"]["test"]["papers"]
    got = report["scores"][f"onnx:{path.name}"]["ranking_score"]
    width = card.metrics["holdout_bound_95"]
    assert abs(got - card.metrics["holdout_ranking"]) <= width
    # the same triplets as training's last evaluation: equal up to float rounding
    assert got == pytest.approx(card.metrics["holdout_ranking"], abs=2e-3)
    assert (
        got
        > report["scores"]["bow"]["ranking_score"]
        > report["scores"]["untrained"]["ranking_score"]
    )
