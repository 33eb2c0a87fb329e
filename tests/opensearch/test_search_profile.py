"""Search profiles: what ``tune`` writes and ``--profile`` loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mathsearch.core.errors import ConfigurationError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_profile import PROFILE_FORMAT, SearchProfile


def test_save_load_round_trip_and_request(tmp_path: Path) -> None:
    profile = SearchProfile(
        mode=Mode.RESCORE, alpha=0.3, window=50, normalization=Normalization.L2,
        combination=Combination.HARMONIC_MEAN, k=20, source={"metric": "nDCG@10"},
    )  # fmt: skip
    path = profile.save(tmp_path / "p" / "best.json")
    data = json.loads(path.read_text())
    assert data["format"] == PROFILE_FORMAT and data["mode"] == "rescore"
    loaded = SearchProfile.load(path)
    assert loaded == profile and loaded.source == {"metric": "nDCG@10"}
    request = loaded.request("x^2")
    assert (request.mode, request.alpha, request.window, request.k) == (Mode.RESCORE, 0.3, 50, 20)
    assert request.normalization is Normalization.L2


def test_overrides_win_and_window_grows_with_k() -> None:
    request = SearchProfile(alpha=0.2, window=10, depth=10).request("x", alpha=0.9, k=40)
    assert (request.alpha, request.k, request.window, request.depth) == (0.9, 40, 40, 40)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"mode": "dense"}, "bad search profile"),
        ({"alpha": 2.0}, "alpha must lie in [0, 1]"),
        ({"weights": [1, 2]}, "unknown search profile keys: weights"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_profiles_are_configuration_errors(tmp_path: Path, data: object, words: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigurationError, match=words.replace("[", r"\[").replace("]", r"\]")):
        SearchProfile.load(path)


def test_unreadable_profiles_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read search profile"):
        SearchProfile.load(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(ConfigurationError, match="is not JSON"):
        SearchProfile.load(tmp_path / "x.json")
