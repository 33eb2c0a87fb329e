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


def test_a_profile_names_the_encoders_it_searches(tmp_path: Path) -> None:
    plain = json.loads(SearchProfile().save(tmp_path / "plain.json").read_text())
    assert "encoders" not in plain  # a one-field profile reads as it always did
    profile = SearchProfile(mode=Mode.RRF, encoders=("gcn", "models/gcn-v8.onnx"))
    path = profile.save(tmp_path / "two.json")
    assert json.loads(path.read_text())["encoders"] == ["gcn", "models/gcn-v8.onnx"]
    loaded = SearchProfile.load(path)
    assert loaded == profile and loaded.encoders == ("gcn", "models/gcn-v8.onnx")
    assert loaded.request("x").encoders == ("gcn", "models/gcn-v8.onnx")
    # explicit choices win: other encoders, or one field named without encoders
    assert loaded.request("x", encoders=("bitmap",)).encoders == ("bitmap",)
    one_field = loaded.request("x", vector_field="vec_gcn_v7")
    assert one_field.encoders == () and one_field.vector_field == "vec_gcn_v7"
    assert loaded.request("x", vector_field=None).encoders == loaded.encoders


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"mode": "dense"}, "bad search profile"),
        ({"encoders": "gcn"}, "encoders must be names"),
        ({"encoders": ["gcn", ""]}, "encoders must be names"),
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


def test_a_profile_keeps_its_second_stage(tmp_path: Path) -> None:
    profile = SearchProfile(
        mode=Mode.RRF, rerank=("gcn-v8.onnx", "gcn-v9.onnx"), rerank_window=30, rerank_alpha=0.5
    )
    loaded = SearchProfile.load(profile.save(tmp_path / "rr.json"))
    assert loaded == profile
    request = loaded.request("x^2")
    assert request.rerank == ("gcn-v8.onnx", "gcn-v9.onnx") and request.reranks
    assert (request.rerank_window, request.rerank_alpha) == (30, 0.5)
    assert not loaded.request("x^2", rerank=()).reranks  # --no-rerank
    assert "rerank top 30 by gcn-v8, gcn-v9, alpha 0.5" in loaded.label
    plain = SearchProfile(mode=Mode.RRF).to_dict()  # no second stage: no rerank keys written
    assert not any(key.startswith("rerank") for key in plain)
    for bad, words in (({"rerank": "gcn"}, "rerank must be names"), ({"rerank_alpha": 2}, "")):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps({"rerank": ["gcn"], **bad}))
        with pytest.raises(ConfigurationError, match=words or "rerank_alpha"):
            SearchProfile.load(path)


def test_the_shipped_profile_reranks_with_shipped_models() -> None:
    from mathsearch.runtime.embedders import shipped_or_path

    profile = SearchProfile.default()
    assert profile.rerank and profile.rerank_window > 0
    assert all(Path(shipped_or_path(name)).is_file() for name in profile.rerank)


def test_a_profile_keeps_a_wildcard_first_stage_other_than_the_default(tmp_path: Path) -> None:
    assert "wildcard_mode" not in SearchProfile().to_dict()  # the default reads as before
    path = SearchProfile(wildcard_mode="knn").save(tmp_path / "p.json")
    assert json.loads(path.read_text())["wildcard_mode"] == "knn"
    loaded = SearchProfile.load(path)
    assert loaded.request("?x + 1").wildcard_first_mode is Mode.KNN
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": PROFILE_FORMAT, "wildcard_mode": "grep"}))
    with pytest.raises(ConfigurationError, match="wildcard_mode"):
        SearchProfile.load(bad)
