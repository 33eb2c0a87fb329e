from __future__ import annotations

import os
from pathlib import Path

import pytest

from mathsearch.opensearch import ConfigurationError, OpenSearchSettings
from mathsearch.stack.node import NodeSpec


def test_defaults_point_at_the_local_node(monkeypatch) -> None:
    for name in ("MATHSEARCH_OPENSEARCH_URL", "MATHSEARCH_OPENSEARCH_USER"):
        monkeypatch.delenv(name, raising=False)
    settings = OpenSearchSettings.from_env()
    assert settings.url == "http://127.0.0.1:9200"
    assert settings.port == 9200
    assert settings.is_local


def test_external_cluster_with_auth_and_ca(monkeypatch, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", "https://search.example.org:9243")
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_USER", "librarian")
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_PASSWORD_FILE", str(secret))
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_CA_FILE", str(ca))
    settings = OpenSearchSettings.from_env()
    assert settings.password == "s3cret"
    assert settings.ca_file == ca
    assert settings.port == 9243
    assert not settings.is_local
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("MATHSEARCH_OPENSEARCH_URL", "localhost:9200", "http"),
        ("MATHSEARCH_OPENSEARCH_HEAP", "lots", "512m"),
        ("MATHSEARCH_OPENSEARCH_VERIFY_CERTS", "maybe", "boolean"),
        ("MATHSEARCH_OPENSEARCH_CA_FILE", "/nonexistent/ca.pem", "no such file"),
        ("MATHSEARCH_SERVE_WORKERS", "0", "at least 1 or auto"),
        ("MATHSEARCH_SERVE_WORKERS", "two", "at least 1 or auto"),
    ],
)
def test_bad_settings_raise_typed_errors(monkeypatch, name, value, message) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        OpenSearchSettings.from_env()


@pytest.mark.parametrize(
    ("value", "workers"),
    [(None, 1), ("", 1), ("3", 3), (" auto ", max(1, os.cpu_count() or 1))],
)
def test_serve_workers_are_a_count_or_one_per_core(monkeypatch, value, workers) -> None:
    monkeypatch.delenv("MATHSEARCH_SERVE_WORKERS", raising=False)
    if value is not None:
        monkeypatch.setenv("MATHSEARCH_SERVE_WORKERS", value)
    assert OpenSearchSettings.from_env().serve_workers == workers


def test_node_config_single_and_three_nodes(tmp_path: Path) -> None:
    single = NodeSpec(1, 1, 9200, 9300, tmp_path).opensearch_yml()
    assert "discovery.type: single-node" in single
    assert "network.host: 127.0.0.1" in single
    # a shared, mostly full disk must not turn the test indexes read-only: watermarks in bytes
    assert "cluster.routing.allocation.disk.watermark.flood_stage: 1gb" in single
    third = NodeSpec(3, 3, 9200, 9300, tmp_path)
    yml = third.opensearch_yml()
    assert third.http_port == 9202 and third.transport_port == 9302
    assert "discovery.type" not in yml
    assert '"127.0.0.1:9300", "127.0.0.1:9301", "127.0.0.1:9302"' in yml
    assert 'cluster.initial_cluster_manager_nodes: ["node-1", "node-2", "node-3"]' in yml


def test_several_node_urls(monkeypatch) -> None:
    monkeypatch.setenv(
        "MATHSEARCH_OPENSEARCH_URL",
        "http://127.0.0.1:9200, http://127.0.0.1:9201,http://127.0.0.1:9202",
    )
    settings = OpenSearchSettings.from_env()
    assert settings.urls == [f"http://127.0.0.1:{p}" for p in (9200, 9201, 9202)]
    assert settings.port == 9200
    assert settings.is_local
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", "http://127.0.0.1:9200,127.0.0.1:9201")
    with pytest.raises(ConfigurationError, match="comma-separated"):
        OpenSearchSettings.from_env()
