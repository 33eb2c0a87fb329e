"""Optional API-key auth of ``mathsearch serve``: parsing, constant-time matching, key ids, and
the API's 401s, open routes and per-key rate limits against the real node."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from opensearchpy import OpenSearch

from mathsearch.core.errors import ConfigurationError
from mathsearch.opensearch import OpenSearchSettings
from mathsearch.serve.api_keys import ApiKeys, key_id, parse_keys
from mathsearch.serve.http_api import create_app

KEY_A = "lab-a-0123456789abcdef"
KEY_B = "lab-b-fedcba9876543210"


def test_keys_file_skips_comments_and_refuses_short_keys_without_showing_them() -> None:
    text = f"# the lab's keys\n\n{KEY_A}\n  {KEY_B}  \n# {KEY_A} again\n"
    assert parse_keys(text) == [KEY_A, KEY_B]
    with pytest.raises(ConfigurationError, match="line 2") as caught:
        parse_keys(f"{KEY_A}\nshort-key\n")
    assert "short-key" not in str(caught.value)
    with pytest.raises(ConfigurationError, match="no spaces"):
        parse_keys("a key with spaces in it")


def test_identify_by_bearer_or_header_and_key_ids_hide_the_key() -> None:
    keys = ApiKeys([KEY_A, KEY_B])
    assert keys.enabled and len(keys) == 2
    assert keys.identify({"authorization": f"Bearer {KEY_B}"}) == key_id(KEY_B)
    assert keys.identify({"authorization": f"bearer {KEY_A}"}) == key_id(KEY_A)
    assert keys.identify({"x-api-key": KEY_A}) == key_id(KEY_A)
    for headers in (
        {},
        {"authorization": f"Basic {KEY_A}"},
        {"authorization": f"Bearer {KEY_A}x"},
        {"x-api-key": KEY_A[:-1]},
        {"x-api-key": "\udcff" * 20},
    ):
        assert keys.identify(headers) is None, headers
    assert key_id(KEY_A).startswith("key-") and KEY_A not in key_id(KEY_A)
    assert key_id(KEY_A) != key_id(KEY_B) and not ApiKeys().enabled


def test_keys_come_from_the_file_and_the_single_key_setting(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text(f"# keys\n{KEY_A}\n")
    settings = OpenSearchSettings(serve_api_keys_file=keys_file, serve_api_key=KEY_B)
    assert ApiKeys.from_settings(settings).ids == [key_id(KEY_A), key_id(KEY_B)]
    assert not ApiKeys.from_settings(OpenSearchSettings()).enabled
    keys_file.write_text("# nothing yet\n")
    with pytest.raises(ConfigurationError, match="holds no key"):
        ApiKeys.from_settings(settings)
    with pytest.raises(ConfigurationError, match="cannot read"):
        ApiKeys.from_settings(OpenSearchSettings(serve_api_keys_file=tmp_path / "missing"))
    assert KEY_B not in repr(settings)


@pytest.fixture(scope="module")
def locked(settings: OpenSearchSettings, client: OpenSearch, equation_alias: str) -> TestClient:
    guarded = replace(settings, serve_rate=0.01, serve_burst=2, serve_api_key=KEY_A)
    return TestClient(create_app(guarded, equation_alias, client=client))


@pytest.mark.services
def test_api_routes_need_a_key_health_and_page_do_not(
    locked: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = {"latex": "x^2", "mode": "bm25"}
    missing = locked.post("/search", json=body)
    assert missing.status_code == 401
    assert "API key is required" in missing.json()["error"]["reason"]
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = locked.post("/search", json=body, headers={"x-api-key": KEY_B})
    assert wrong.status_code == 401 and wrong.json()["error"]["reason"] == "unknown API key"
    for path in ("/config", "/metrics", "/equations/x"):
        assert locked.get(path).status_code == 401, path
    assert locked.get("/health").status_code == 200
    assert locked.get("/").status_code == 200 and locked.get("/openapi.json").status_code == 200
    ok = locked.post("/search", json=body, headers={"authorization": f"Bearer {KEY_A}"})
    assert ok.status_code == 200, ok.text
    config = locked.get("/config", headers={"x-api-key": KEY_A}).json()
    assert config["limits"]["api_keys"] is True
    metrics = locked.get("/metrics", headers={"x-api-key": KEY_A}).text
    assert 'mathsearch_http_rejected_total{reason="auth"}' in metrics
    assert KEY_A not in caplog.text and KEY_A not in metrics


@pytest.mark.services
def test_each_key_has_its_own_rate_limit_bucket(
    settings: OpenSearchSettings, client: OpenSearch, equation_alias: str
) -> None:
    limited = replace(settings, serve_rate=0.01, serve_burst=1)
    api = TestClient(
        create_app(limited, equation_alias, client=client, api_keys=ApiKeys([KEY_A, KEY_B]))
    )
    first = {"x-api-key": KEY_A}
    assert api.post("/render", json={"latex": "x"}, headers=first).status_code == 200
    assert api.post("/render", json={"latex": "x"}, headers=first).status_code == 429
    # the same address, another key: a bucket of its own
    assert api.post("/render", json={"latex": "x"}, headers={"x-api-key": KEY_B}).status_code == 200
