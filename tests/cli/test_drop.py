"""`mathsearch drop` against the real stack: refuses without --yes, then removes it all."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.opensearch import OpenSearchSettings
from mathsearch.opensearch.schema import failures_index_name
from tests.workers.conftest import scratch_alias

from .test_main import _mathsearch

pytestmark = pytest.mark.services

PAPER = r"""\documentclass{article}
\begin{document}
\begin{equation} \phi(x) = \sum_k a_k e^{ikx} \end{equation}
\begin{equation} \frac{a}{ \end{equation}
\begin{equation} Z = \int \mathcal{D}\phi \, e^{-S[\phi]} \end{equation}
\end{document}
"""


def _failure_count(client: OpenSearch, failures: str, alias: str) -> int:
    client.indices.refresh(index=failures)
    return client.count(index=failures, body={"query": {"term": {"index": alias}}})["count"]


def test_drop_refuses_without_yes_then_removes_the_index(
    client: OpenSearch, settings: OpenSearchSettings, tmp_path: Path
) -> None:
    paper = tmp_path / "paper.tex"
    paper.write_text(PAPER)
    failures = failures_index_name(settings)
    with (
        scratch_alias(client, settings, "cli-drop") as alias,
        scratch_alias(client, settings, "cli-keep") as other,
    ):
        for name in (alias, other):
            done = _mathsearch("index", str(paper), "--index", name, "--inline", "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["failed"] == 1
        version = f"{alias}-000001"

        refused = _mathsearch("drop", alias)
        assert refused.returncode == 1 and refused.stdout == ""
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        for part in (f"alias {alias}", version, f"{alias}-template", "1 failure record "):
            assert part in refused.stderr
        assert "--yes" in refused.stderr
        assert client.indices.exists_alias(name=alias)  # nothing removed

        dropped = _mathsearch("drop", alias, "--yes", "--json")
        assert dropped.returncode == 0, dropped.stderr
        report = json.loads(dropped.stdout)
        assert report["indexes"] == [version] and report["failure_records"] == 1
        assert report["template"] == f"{alias}-template"
        assert not client.indices.exists_alias(name=alias)
        assert not client.indices.exists(index=version)
        assert not client.indices.exists_index_template(name=f"{alias}-template")
        assert _failure_count(client, failures, alias) == 0
        # the other index is untouched
        assert client.count(index=other)["count"] == 2
        assert _failure_count(client, failures, other) == 1

        again = _mathsearch("drop", alias, "--yes")
        assert again.returncode == 1 and f"no equation index {alias}" in again.stderr


def test_drop_errors_are_one_line(settings: OpenSearchSettings) -> None:
    refusals = {
        "*": "not an equation index name",
        failures_index_name(settings): "is an index, not",
    }
    for name, reason in refusals.items():
        result = _mathsearch("drop", name, "--yes")
        assert result.returncode == 1 and reason in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    missing = f"{settings.index_prefix}-test-cli-missing-{uuid.uuid4().hex[:8]}"
    result = _mathsearch("drop", missing)
    assert result.returncode == 1 and f"no equation index {missing}" in result.stderr
