"""Property tests of ``mathsearch serve``'s API against the real node (in-process ASGI): whatever
arrives - random JSON, wrong types, huge or non-finite numbers, deep nesting, invalid UTF-8,
random content types - the answer is never a 500 and every error is JSON with a reason."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as fuzz_settings
from hypothesis import strategies as st
from opensearchpy import OpenSearch

from mathsearch.bench.fuzz_api import CONTENT_TYPES, FIELDS, SPECIALS, fuzz_api, is_crash
from mathsearch.opensearch import OpenSearchSettings

pytestmark = [pytest.mark.services]

FUZZ = fuzz_settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.sampled_from(SPECIALS)
    | st.sampled_from(["knn", "bm25", "rrf", "fusion", "min_max", "gcn", "symbols", "doc_id"])
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
search_bodies = st.fixed_dictionaries(
    {"latex": st.text(max_size=80) | st.sampled_from(SPECIALS)},
    optional={name: json_values for name in FIELDS if name != "latex"},
)


@pytest.fixture(scope="module")
def api(settings: OpenSearchSettings, client: OpenSearch, equation_alias: str) -> TestClient:
    from mathsearch.serve.http_api import create_app

    app = create_app(replace(settings, serve_rate=0), equation_alias, client=client)
    return TestClient(app, raise_server_exceptions=True)


def _check(response: Any) -> None:
    why = is_crash(response.status_code, response.headers.get("content-type", ""), response.content)
    assert why is None, (why, response.text[:500])


@FUZZ
@given(
    body=search_bodies | json_values,
    path=st.sampled_from(["/search", "/render"]),
    content_type=st.sampled_from(CONTENT_TYPES),
)
def test_random_json_bodies_never_crash(
    api: TestClient, body: Any, path: str, content_type: str
) -> None:
    raw = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    response = api.post(path, content=raw, headers={"content-type": content_type})
    _check(response)
    if response.status_code == 200:
        assert response.json()  # a search or a rendering, as JSON


@FUZZ
@given(raw=st.binary(max_size=300), path=st.sampled_from(["/search", "/render"]))
def test_raw_bytes_and_invalid_utf8_never_crash(api: TestClient, raw: bytes, path: str) -> None:
    _check(api.post(path, content=raw, headers={"content-type": "application/json"}))
    broken = b'{"latex": "x' + raw.replace(b'"', b"") + b'\xff\xfe"}'
    _check(api.post(path, content=broken, headers={"content-type": "application/json"}))


@FUZZ
@given(ident=st.text(max_size=60), method=st.sampled_from(["GET", "PUT", "DELETE", "OPTIONS"]))
def test_equation_ids_and_methods_never_crash(api: TestClient, ident: str, method: str) -> None:
    path = f"/equations/{quote(ident, safe='', errors='surrogatepass')}"
    _check(api.request(method, path))


def test_mutated_real_queries_never_crash(api: TestClient) -> None:
    """The bench's own generator (`mathsearch bench fuzz-api`), a few hundred inputs."""
    from mathsearch.bench.serve import bench_queries

    report = fuzz_api(api.app, inputs=300, seeds=bench_queries(limit=100), seed=11)
    assert report["crashes"] == 0, report["crash_examples"]
    assert {"200", "422"} <= set(report["by_status"])
