"""One line for a cluster that cannot be used: unreachable, slow, refusing credentials, TLS."""

from __future__ import annotations

import pytest
from opensearchpy import OpenSearch
from opensearchpy.exceptions import (
    AuthenticationException,
    AuthorizationException,
    ConnectionTimeout,
    NotFoundError,
)
from opensearchpy.exceptions import ConnectionError as OSConnectionError

from mathsearch.core.cluster_faults import client_url, cluster_fault, refused_request
from mathsearch.core.errors import QueryError


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", "https://admin:s3cret@node:9200")
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_USER", "admin")


def test_client_url_names_every_host_without_credentials() -> None:
    client = OpenSearch(hosts=["http://u:p@127.0.0.1:9299", "https://h2:9241"])
    assert client_url(client) == "http://127.0.0.1:9299,https://h2:9241"
    assert client_url(object()) is None


def test_each_fault_names_the_url_and_the_setting_once() -> None:
    refused = OSConnectionError("N/A", "refused", ConnectionRefusedError(111, "Connection refused"))
    line = cluster_fault(refused)
    assert line == (
        "OpenSearch at https://admin:***@node:9200 does not answer (Connection refused): "
        "start it with `mathsearch stack up` or set MATHSEARCH_OPENSEARCH_URL"
    )
    slow = ConnectionTimeout("TIMEOUT", "read timed out", None)
    assert "did not answer in time (read timed out): raise MATHSEARCH_OPENSEARCH_TIMEOUT" in str(
        cluster_fault(slow, "http://h:1")
    )
    denied = AuthenticationException(401, "security_exception", {})
    assert "refused the credentials of user admin (HTTP 401)" in str(cluster_fault(denied))
    forbidden = AuthorizationException(
        403, "security_exception", {"error": {"type": "security_exception", "reason": "no"}}
    )
    assert str(cluster_fault(forbidden)).endswith(
        "check the permissions of MATHSEARCH_OPENSEARCH_USER"
    )
    # a typed error raised from a fault carries it; other errors are not faults
    try:
        try:
            raise refused
        except OSConnectionError as exc:
            raise QueryError("search failed") from exc
    except QueryError as typed:
        assert "does not answer (Connection refused)" in str(cluster_fault(typed))
    assert cluster_fault(ValueError("x")) is None
    missing = NotFoundError(404, "index_not_found_exception", {})
    assert cluster_fault(missing) is None
    assert refused_request(missing) == (
        "OpenSearch at https://admin:***@node:9200 refused a request: 404 index_not_found_exception"
    )
