"""The secure profile: a real OpenSearch with the security plugin, TLS and basic auth.

mathsearch's own ``connect()`` reaches it with https + CA file + user + password from a file and
creates, writes and searches an equation index; a wrong password, plain http, the wrong CA and no
CA all fail with one clear line; k-NN and neural-search are there beside opensearch-security.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mathsearch.core.errors import ClusterUnavailableError
from mathsearch.opensearch import OpenSearchSettings, connect
from mathsearch.opensearch.bulk_writer import BulkWriter
from mathsearch.opensearch.equation_index import ensure_equation_index
from mathsearch.opensearch.schema import VectorSpec
from mathsearch.stack.security import AdminPassword
from mathsearch.stack.stack import ClusterAuthenticationError, cluster_status

from .secure_node import SecureNode, secure_node_fixture  # noqa: F401 - the fixture

pytestmark = [pytest.mark.services]

REPO = Path(__file__).resolve().parents[2]


def _env_settings(node: SecureNode, monkeypatch: pytest.MonkeyPatch) -> OpenSearchSettings:
    """OpenSearchSettings.from_env() with exactly the lines `stack up --secure` printed."""
    monkeypatch.delenv("MATHSEARCH_OPENSEARCH_PASSWORD", raising=False)
    for name, value in node.env.items():
        monkeypatch.setenv(name, value)
    return OpenSearchSettings.from_env()


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    full.pop("MATHSEARCH_OPENSEARCH_PASSWORD", None)
    return subprocess.run(
        [sys.executable, "-m", "mathsearch.cli.main", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def test_up_prints_the_exports_that_point_mathsearch_at_it(secure_node: SecureNode) -> None:
    printed = "\n".join(secure_node.up_lines)
    for name, value in secure_node.env.items():
        assert f"export {name}={value}" in printed
    assert secure_node.env["MATHSEARCH_OPENSEARCH_URL"].startswith("https://127.0.0.1:")


def test_connect_with_tls_and_password_file_creates_writes_and_searches(
    secure_node: SecureNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _env_settings(secure_node, monkeypatch)
    assert settings.password == secure_node.password  # read from the file, newline stripped
    client = connect(settings)
    alias = "mathsearch-secure-test-equations"
    concrete = ensure_equation_index(
        client, alias, [VectorSpec("vec_test_v1", 3, "cosinesimil")], settings
    )
    try:
        report = BulkWriter(client, settings, refresh="true").write(
            [
                {
                    "_op_type": "index",
                    "_index": alias,
                    "_id": "secure-1",
                    "_source": {
                        "eq_id": "secure-1",
                        "latex": "E = m c^2",
                        "math_tokens": "E = m c ^ 2",
                        "vec_test_v1": [1.0, 0.0, 0.0],
                    },
                }
            ]
        )
        assert report.written == 1
        hits = client.search(index=alias, body={"query": {"match": {"math_tokens": "m c"}}})
        assert [h["_id"] for h in hits["hits"]["hits"]] == ["secure-1"]
        knn = {"knn": {"vec_test_v1": {"vector": [0.9, 0.1, 0.0], "k": 1}}}
        hits = client.search(index=alias, body={"size": 1, "query": knn})
        assert hits["hits"]["hits"][0]["_id"] == "secure-1"
    finally:
        client.indices.delete(index=concrete, ignore_unavailable=True)


def test_wrong_password_is_one_line_and_exit_1_through_the_cli(
    secure_node: SecureNode, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n", encoding="utf-8")
    env = {**secure_node.env, "MATHSEARCH_OPENSEARCH_PASSWORD_FILE": str(wrong)}
    result = _cli(env, "stack", "status")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "refused the credentials of user admin (HTTP 401)" in lines[0]


def test_no_credentials_are_refused(secure_node: SecureNode) -> None:
    settings = dataclasses.replace(
        secure_node.stack.client_settings(_password(secure_node)), user=None, password=None
    )
    with pytest.raises(ClusterAuthenticationError, match="HTTP 401"):
        cluster_status(settings)


def test_plain_http_to_the_tls_port_fails(secure_node: SecureNode) -> None:
    settings = dataclasses.replace(
        secure_node.stack.client_settings(_password(secure_node)),
        url=secure_node.stack.url.replace("https://", "http://"),
        timeout=5.0,
    )
    with pytest.raises(ClusterUnavailableError, match="does not answer"):
        cluster_status(settings)


def test_the_wrong_ca_and_no_ca_fail_verification(secure_node: SecureNode, tmp_path: Path) -> None:
    other_ca = tmp_path / "other-ca.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=other-ca",
         "-keyout", str(tmp_path / "other-ca-key.pem"), "-out", str(other_ca), "-days", "2"],
        check=True, capture_output=True,
    )  # fmt: skip
    base = secure_node.stack.client_settings(_password(secure_node))
    for ca_file in (other_ca, None):
        settings = dataclasses.replace(base, ca_file=ca_file, timeout=5.0)
        with pytest.raises(ClusterUnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
            cluster_status(settings)


def test_knn_and_neural_search_are_still_there(secure_node: SecureNode) -> None:
    status = cluster_status(secure_node.stack.client_settings(_password(secure_node)))
    assert status["health"] == "green"
    assert status["missing_plugins"] == []
    assert {"opensearch-knn", "opensearch-neural-search", "opensearch-security"} <= set(
        status["plugins"]
    )


def _password(node: SecureNode) -> AdminPassword:
    return AdminPassword(node.password, "test", node.password_file)
