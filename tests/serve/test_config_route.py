"""``GET /config`` is the search page's only source of mode info (no cluster: a stub client)."""

from __future__ import annotations

import re
from unittest.mock import MagicMock

import pytest
from fastapi.testclient import TestClient

from mathsearch.opensearch.fusion import Normalization
from mathsearch.opensearch.modes import MODES
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_profile import SearchProfile
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.serve.http_api import WEB_DIR, create_app

#: What the page reads of each mode (its hint, the controls it shows, the breakdown's scores).
PAGE_KEYS = {"summary", "parameters", "subqueries"}


@pytest.fixture(scope="module")
def config() -> dict:
    profile = SearchProfile.default()
    app = create_app(
        OpenSearchSettings(), "equations", client=MagicMock(), encoder=MagicMock(),
        profile=SearchProfile(mode=profile.mode, alpha=profile.alpha),
    )  # fmt: skip
    response = TestClient(app).get("/config")
    assert response.status_code == 200, response.text
    return response.json()


def test_config_describes_every_registered_mode(config: dict) -> None:
    assert config["modes"] == [mode.value for mode in MODES]
    assert set(config["modes"]) == {mode.value for mode in Mode}
    assert list(config["mode_info"]) == config["modes"]
    for mode, spec in MODES.items():
        info = config["mode_info"][mode.value]
        assert set(info) >= PAGE_KEYS, mode
        assert info["summary"] == spec.summary
        assert info["parameters"] == list(spec.parameters)
        assert info["subqueries"] == spec.subqueries()


def test_config_carries_the_profile_defaults_the_page_starts_from(config: dict) -> None:
    shipped = SearchProfile.default()
    defaults = config["defaults"]
    assert (defaults["mode"], defaults["alpha"]) == (shipped.mode.value, shipped.alpha)
    assert {"mode", "k", "alpha", "normalization"} <= set(defaults)
    assert defaults["mode"] in config["modes"]
    assert config["normalizations"] == [n.value for n in Normalization]


def test_the_page_keeps_no_copy_of_the_modes() -> None:
    script = (WEB_DIR / "app.js").read_text(encoding="utf-8")
    assert "FALLBACK" not in script
    for spec in MODES.values():
        assert spec.summary not in script, spec.mode
    # no mode name as an object key or a string literal of its own
    for mode in MODES:
        assert not re.search(rf"""["']{re.escape(mode.value)}["']\s*[:,\]]""", script), mode
    assert 'api("config")' in script and "mode_info" in script
