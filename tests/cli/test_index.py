"""`mathsearch index --prune` and `mathsearch delete` against the real stack."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from opensearchpy import OpenSearch

from mathsearch.opensearch import OpenSearchSettings
from tests.workers.conftest import scratch_alias

from .test_main import _mathsearch

pytestmark = pytest.mark.services

PAPER = r"""\documentclass{article}
\begin{document}
\section{Fields}
\begin{equation} \phi(x) = \sum_k a_k e^{ikx} \end{equation}
%s
\begin{equation} Z = \int \mathcal{D}\phi \, e^{-S[\phi]} \end{equation}
\end{document}
"""


@pytest.fixture
def alias(client: OpenSearch, settings: OpenSearchSettings):
    with scratch_alias(client, settings, "cli-index") as name:
        yield name


def _equations(client: OpenSearch, alias: str) -> dict[str, str]:
    client.indices.refresh(index=alias)
    answer = client.search(index=alias, body={"size": 100, "_source": ["latex"]})
    return {hit["_id"]: hit["_source"]["latex"] for hit in answer["hits"]["hits"]}


def test_prune_and_delete_from_the_command_line(client, alias, tmp_path: Path) -> None:
    paper, other = tmp_path / "paper.tex", tmp_path / "other.tex"
    middle = r"\begin{equation} S = \int d^4x \, \frac{1}{2} (\partial \phi)^2 \end{equation}"
    paper.write_text(PAPER % middle)
    other.write_text(PAPER % "")
    first = _mathsearch("index", str(paper), str(other), "--index", alias, "--inline", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["written"] == 5
    assert set(_equations(client, alias)) == {"paper#0", "paper#1", "paper#2", "other#0", "other#1"}
    # the revision drops the middle equation: the last one moves to position 1
    paper.write_text(PAPER % "")
    pruned = _mathsearch("index", str(paper), "--index", alias, "--inline", "--prune")
    assert pruned.returncode == 0, pruned.stderr
    assert "pruned 1 equations and 0 failure records that the 1 documents" in pruned.stdout
    equations = _equations(client, alias)
    assert set(equations) == {"paper#0", "paper#1", "other#0", "other#1"}
    assert "mathcal{D}" in equations["paper#1"]  # overwritten by the revision
    gone = _mathsearch("delete", "other", "--index", alias, "--json")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["equations"] == 2
    assert set(_equations(client, alias)) == {"paper#0", "paper#1"}
    again = _mathsearch("delete", "other", "--index", alias)
    assert again.returncode == 0 and "removed 0 equations" in again.stdout


def test_delete_errors_are_one_line(settings: OpenSearchSettings) -> None:
    none = _mathsearch("delete", "--index", "x")
    assert none.returncode == 1 and "no document ids" in none.stderr
    missing = f"{settings.index_prefix}-test-cli-missing-{uuid.uuid4().hex[:8]}"
    result = _mathsearch("delete", "paper", "--index", missing)
    assert result.returncode == 1 and f"no equation index {missing}" in result.stderr
    assert "Traceback" not in result.stderr


def test_failures_lists_what_failed_and_delete_clears_it(client, alias, tmp_path: Path) -> None:
    broken = r"""\begin{equation} \frac{a}{ \end{equation}
\begin{equation} \begin{foo} x \end{foo} \end{equation}"""
    paper = tmp_path / "broken.tex"
    paper.write_text(PAPER % broken)
    indexed = _mathsearch("index", str(paper), "--index", alias, "--inline", "--json")
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["failed"] == 2
    listed = _mathsearch("failures", "--index", alias)
    assert listed.returncode == 0, listed.stderr
    assert f"2 failure records for {alias}" in listed.stdout
    assert "convert: unbalanced-braces 1, unknown-environment 1" in listed.stdout
    assert r"broken#1  convert/unbalanced-braces" in listed.stdout and r"\frac{a}{" in listed.stdout
    one = _mathsearch("failures", "--index", alias, "--reason", "unknown-environment", "--json")
    summary = json.loads(one.stdout)
    assert summary["total"] == 1 and summary["records"][0]["eq_id"] == "broken#2"
    assert _mathsearch("delete", "broken", "--index", alias).returncode == 0
    cleared = json.loads(_mathsearch("failures", "--index", alias, "--json").stdout)
    assert cleared["total"] == 0
    assert set(_equations(client, alias)) == set()


def test_binary_and_unterminated_sources_are_failure_records_not_silence(
    alias, tmp_path: Path
) -> None:
    """A binary .tex gave "indexed 0 of 0" and an unclosed equation vanished, without a record."""
    blob, open_env = tmp_path / "blob.tex", tmp_path / "open.tex"
    blob.write_bytes(bytes(range(256)) * 4)
    open_env.write_text(PAPER % r"\begin{equation} E = mc^2")
    indexed = _mathsearch("index", str(blob), str(open_env), "--index", alias, "--inline", "--json")
    assert indexed.returncode == 0, indexed.stderr
    report = json.loads(indexed.stdout)
    assert (report["written"], report["failed"]) == (2, 2)
    listed = json.loads(_mathsearch("failures", "--index", alias, "--json").stdout)
    reasons = {record["eq_id"]: record["reason"] for record in listed["records"]}
    assert reasons == {"blob#*": "binary-source", "open#1": "unterminated-environment"}


def test_delete_with_figures_also_removes_the_documents_figures(
    client, settings, alias, tmp_path: Path
) -> None:
    from mathsearch.indexer.figures import figures_of_text
    from mathsearch.opensearch.figure_index import index_figures
    from mathsearch.opensearch.schema import failures_index_name
    from mathsearch.runtime.embedders import load_embedder

    for name in ("paper", "other"):
        (tmp_path / f"{name}.tex").write_text(PAPER % "")
    sources = [str(tmp_path / "paper.tex"), str(tmp_path / "other.tex")]
    assert _mathsearch("index", *sources, "--index", alias, "--inline").returncode == 0
    figures = f"{alias}-figures"
    records = figures_of_text(
        r"\begin{figure}\caption{The field profile}\end{figure}"
        r"\begin{figure}\caption{open",  # unclosed: a failure record of this document
        "other",
    ) + figures_of_text(r"\begin{figure}\caption{The mass spectrum}\end{figure}", "paper")
    embedder = load_embedder("figure", device="cpu")
    failures = failures_index_name(settings)
    try:
        report = index_figures(client, figures, records, embedder, settings=settings)
        assert (report.figures, report.failures) == (2, 1)
        missing = _mathsearch("delete", "other", "--index", alias, "--figures", f"{figures}-x")
        assert missing.returncode == 1 and f"no figures index {figures}-x" in missing.stderr
        gone = _mathsearch("delete", "other", "--index", alias, "--figures", figures, "--json")
        assert gone.returncode == 0, gone.stderr
        removed = json.loads(gone.stdout)
        assert removed["equations"] == 2
        assert removed["figures"] == {"index": figures, "figures": 1, "failure_records": 1}
        client.indices.refresh(index=figures)
        left = client.search(index=figures, body={"_source": ["doc_id"]})["hits"]["hits"]
        assert [hit["_source"]["doc_id"] for hit in left] == ["paper"]
        assert set(_equations(client, alias)) == {"paper#0", "paper#1"}
    finally:
        client.indices.delete(index=figures, ignore_unavailable=True)
        client.delete(index=failures, id=f"{figures}/other#fig1", ignore=404, refresh=True)
