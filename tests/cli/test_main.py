"""The `mathsearch` command against the real stack."""

from __future__ import annotations

import http.server
import json
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mathsearch.cli.main import main
from mathsearch.runtime.embedders import MODELS_DIR
from tests.conftest import DEFAULT_DIM, DEFAULT_FIELD

#: Nothing listens there: every request is refused.
DEAD_URL = "http://127.0.0.1:9299"


def _mathsearch(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mathsearch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_help_lists_commands_with_examples() -> None:
    result = _mathsearch("--help")
    assert result.returncode == 0
    for word in ("stack", "demo", "worker", "examples:"):
        assert word in result.stdout


def test_unknown_command_fails_with_usage() -> None:
    result = _mathsearch("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


@pytest.mark.services
def test_stack_status_json_shows_green_and_plugins() -> None:
    result = _mathsearch("stack", "status", "--json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["health"] == "green"
    assert {"opensearch-knn", "opensearch-neural-search"} <= set(status["plugins"])
    assert status["redis"]["ok"] is True


@pytest.mark.services
def test_status_of_an_unreachable_cluster_is_one_line_and_nonzero() -> None:
    import os

    env = {**os.environ, "MATHSEARCH_OPENSEARCH_URL": "http://127.0.0.1:9"}
    result = subprocess.run(
        [sys.executable, "-m", "mathsearch.cli.main", "stack", "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("mathsearch: error: OpenSearch at http://127.0.0.1:9")
    assert "Traceback" not in result.stderr


@pytest.mark.services
def test_demo_indexes_real_equations_and_answers_hybrid_queries() -> None:
    result = _mathsearch("demo", "--no-stack-up", "--json", "--k", "3")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    first_latex = report["queries"][0]["latex"]
    assert report["indexed"] > 150
    assert sum(report["rejected"].values()) > 0
    # the vectors come from the shipped models through the ONNX runtime, one field each
    fields = [m["field"] for m in report["models"]]
    assert fields[0] == DEFAULT_FIELD and report["models"][0]["dim"] == DEFAULT_DIM
    assert len(fields) == len(set(fields)) >= 1
    if report["workers"].startswith("started") and (MODELS_DIR / "gcn-v8.onnx").is_file():
        # the demo's own workers serve the shipped second graph CNN too (running ones serve
        # what MATHSEARCH_ENCODERS says)
        assert fields == [DEFAULT_FIELD, "vec_gcn_v8"]
    modes = {q["mode"] for q in report["queries"]}
    fused = {m for m in modes if m.startswith("rrf: bm25")}
    assert modes - fused == {"fusion", "rrf", "rescore", "knn-rescore", "knn", "bm25"}
    # the ranking parameters come from the shipped default profile, named in the report
    profile = report["profile"]
    assert profile["label"] and profile["format"].startswith("mathsearch-search-profile")
    assert report["queries"][0]["mode"] == profile["mode"]  # the profile's mode first
    if len(fields) > 1:  # BM25 + every encoder's kNN fused in one hybrid query
        assert fused == {"rrf: bm25 + " + " + ".join(fields)}
        by_mode = {q["mode"]: q for q in report["queries"] if q["latex"] == first_latex}
        single, multi = by_mode["rrf"]["hits"], by_mode[next(iter(fused))]["hits"]
        # three ranked lists give larger reciprocal-rank sums than two can reach (the
        # profile's rrf row re-ranks its window, so its scores are on another scale)
        assert multi[0]["score"] > 2 / (60 + 1) and single[0]["score"] > 0
    for query in report["queries"]:
        assert len(query["hits"]) == 3
    # each query retypes part of an equation of paper 0301004: every mode ranks that
    # near-identical equation first for every query (gcn-v7, towers trained with sub-formula
    # crops: docs/encoders.md), and so does the fused bm25 + gcn-v7 + gcn-v8 row
    for query in report["queries"]:
        assert query["expected"], query["mode"]
        assert query["expected_first"], (query["mode"], query["latex"])
        assert query["hits"][0]["eq_id"] in query["expected"]
    # an equivalent rewriting among near misses: first with canonical forms, missed without
    equivalence = report["equivalence"]
    assert equivalence["canonical_first"], equivalence["canonical"]
    assert equivalence["canonical"][0]["eq_id"] == equivalence["expected"] == "rewrite#0"
    assert not equivalence["structure_only_first"], equivalence["structure_only"]


def _one_error_line(captured: pytest.CaptureResult[str]) -> str:
    """The single ``mathsearch: error:`` line of ``captured``'s stderr (nothing else there)."""
    assert "Traceback" not in captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("mathsearch: error: ")
    return lines[0]


@pytest.fixture
def dead_node(monkeypatch: pytest.MonkeyPatch) -> str:
    """MATHSEARCH_OPENSEARCH_URL pointing at a port nothing listens on (no credentials)."""
    monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", DEAD_URL)
    for name in ("USER", "PASSWORD", "PASSWORD_FILE", "CA_FILE"):
        monkeypatch.delenv(f"MATHSEARCH_OPENSEARCH_{name}", raising=False)
    return DEAD_URL


PAPER = r"\begin{document}\begin{equation} x^2 + y^2 = z^2 \end{equation}\end{document}"


@pytest.mark.parametrize(
    "argv",
    [
        ["index", "{paper}", "--index", "x", "--inline"],
        ["failures", "--index", "x"],
        ["delete", "0301001", "--index", "x"],
        ["models", "list"],
        ["search", "x^2", "--mode", "bm25"],
        ["stack", "status"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_an_unreachable_node_is_one_line_naming_the_url_and_the_setting(
    argv: list[str], dead_node: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paper = tmp_path / "a.tex"
    paper.write_text(PAPER)
    code = main([arg.replace("{paper}", str(paper)) for arg in argv])
    line = _one_error_line(capsys.readouterr())
    assert code == 1
    assert line == (
        f"mathsearch: error: OpenSearch at {dead_node} does not answer (Connection refused): "
        "start it with `mathsearch stack up` or set MATHSEARCH_OPENSEARCH_URL"
    )


def test_debug_shows_the_traceback_of_the_fault(dead_node: str) -> None:
    from opensearchpy.exceptions import ConnectionError as OSConnectionError

    with pytest.raises(OSConnectionError):
        main(["--debug", "failures", "--index", "x"])


class _Refusing(http.server.BaseHTTPRequestHandler):
    """An OpenSearch stand-in that refuses every request's credentials (401)."""

    def do_GET(self) -> None:
        body = json.dumps({"error": {"type": "security_exception", "reason": "no"}, "status": 401})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    do_POST = do_HEAD = do_GET  # noqa: N815 - http.server's names

    def log_message(self, *_: object) -> None:
        return


@contextmanager
def _fake_node(context: ssl.SSLContext | None = None) -> Iterator[int]:
    """A local server answering 401 (over TLS with ``context``); yields its port."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_refused_credentials_name_the_user_and_the_password_settings(
    dead_node: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with _fake_node() as port:
        url = f"http://127.0.0.1:{port}"
        monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", url)
        monkeypatch.setenv("MATHSEARCH_OPENSEARCH_USER", "alice")
        monkeypatch.setenv("MATHSEARCH_OPENSEARCH_PASSWORD", "wrong")
        code = main(["failures", "--index", "x"])
        line = _one_error_line(capsys.readouterr())
        assert code == 1
        assert f"OpenSearch at {url} refused the credentials of user alice (HTTP 401)" in line
        assert "check MATHSEARCH_OPENSEARCH_USER and MATHSEARCH_OPENSEARCH_PASSWORD" in line
        assert "wrong" not in line
        # https:// to a plain HTTP node: TLS fails, and the line says which scheme to use
        url = f"https://127.0.0.1:{port}"
        monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", url)
        assert main(["failures", "--index", "x"]) == 1
        line = _one_error_line(capsys.readouterr())
        assert f"TLS with OpenSearch at {url} failed (WRONG_VERSION_NUMBER" in line
        assert "use http:// in MATHSEARCH_OPENSEARCH_URL" in line


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_an_unverifiable_certificate_names_the_ca_setting(
    dead_node: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(cert), "-days", "1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with _fake_node(context) as port:
        url = f"https://127.0.0.1:{port}"
        monkeypatch.setenv("MATHSEARCH_OPENSEARCH_URL", url)
        assert main(["failures", "--index", "x"]) == 1
        line = _one_error_line(capsys.readouterr())
    assert f"TLS with OpenSearch at {url} failed (CERTIFICATE_VERIFY_FAILED" in line
    assert "set MATHSEARCH_OPENSEARCH_CA_FILE" in line


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("nope.tex", None, "cannot index {path}: no such file or folder"),
        ("notes.txt", "hello\nno markers here\n", "{path} is not a hep-th record file"),
    ],
    ids=["missing", "not-hepth"],
)
def test_index_refuses_a_missing_or_unrecognised_source_before_connecting(
    name: str,
    content: str | None,
    expected: str,
    dead_node: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    good = tmp_path / "good.tex"
    good.write_text(PAPER)
    code = main(["index", str(good), str(path), "--index", "x", "--inline"])
    line = _one_error_line(capsys.readouterr())
    assert code == 1
    assert expected.format(path=path) in line
    assert "does not answer" not in line  # refused before any cluster call
    if content is not None:
        assert "pass --format" in line
