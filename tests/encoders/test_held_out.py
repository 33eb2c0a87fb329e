"""The default model's held-out hep-th papers, rebuilt from its card's split."""

from __future__ import annotations

import pytest

from encoders.held_out import held_out_papers
from export.model_card import load_card
from export.settings import ExportSettings
from opensearch.errors import EvaluationError
from opensearch.relevance_sets import SHARED_DATA

pytestmark = pytest.mark.skipif(
    not (SHARED_DATA / "hepth2003" / "eqnarray.txt").is_file(), reason="needs ../shared/data"
)


def test_the_cards_split_is_rebuilt() -> None:
    card = load_card(ExportSettings.from_env().model)
    papers = held_out_papers()
    assert len(papers) == card.training["data"]["test"]["papers"] == 95
    assert len(set(papers)) == 95
    assert all(p[:7].isdigit() for p in papers)  # hep-th ids, some with a "_cleaned" suffix


def test_a_card_without_a_split_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import export.model_card

    real = export.model_card.load_card

    def no_split(path: object, verify_sha256: bool = True) -> object:
        card = real(path, verify_sha256)
        card.training = {}
        return card

    monkeypatch.setattr(export.model_card, "load_card", no_split)
    with pytest.raises(EvaluationError, match="records no paper split"):
        held_out_papers()
