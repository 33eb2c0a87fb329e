"""JSONL extraction: both line shapes, derived ids, bad lines as failures, and the writer."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mathsearch.indexer.jsonl_source import iter_jsonl, write_jsonl
from mathsearch.indexer.records import EquationRecord, Failure, content_id
from mathsearch.indexer.settings import IndexerSettings


def _write_lines(path: Path, lines: list[str | bytes | dict]) -> Path:
    data = b""
    for line in lines:
        text = json.dumps(line) if isinstance(line, dict) else line
        data += (text if isinstance(text, bytes) else text.encode("utf-8")) + b"\n"
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as handle:
            handle.write(data)
    else:
        path.write_bytes(data)
    return path


def _run(path: Path, **kwargs: int) -> list[EquationRecord | Failure]:
    return list(iter_jsonl(path, IndexerSettings(**kwargs)))


def _failures(items: list) -> list[Failure]:
    return [item for item in items if isinstance(item, Failure)]


# --- equation lines --------------------------------------------------------------------------


def test_equation_lines_with_and_without_ids(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "corpus.jsonl",
        [
            {
                "eq_id": "given",
                "doc_id": "d1",
                "position": 4,
                "latex": "a",
                "section": "S",
                "context": "ctx",
                "year": 2003,
            },
            {"doc_id": "d1", "latex": "b"},
            {"latex": "c^2"},
            {"mathml": "<math><mi>x</mi></math>", "position": 9},
            {"doc_id": 17, "latex": "d", "position": 0},
        ],
    )
    first, second, third, fourth, fifth = _run(path)
    assert first == EquationRecord(
        eq_id="given",
        doc_id="d1",
        position=4,
        latex="a",
        section="S",
        context="ctx",
        source=f"{path}:1",
        extra={"year": 2003},
    )
    # doc named, position = line index (0-based), eq_id from (doc, position)
    assert (second.eq_id, second.doc_id, second.position) == ("d1#1", "d1", 1)
    # no document: doc_id = file stem, eq_id = content id of the LaTeX
    assert (third.eq_id, third.doc_id, third.position) == (content_id("c^2"), "corpus", 2)
    assert fourth.eq_id == content_id("<math><mi>x</mi></math>")
    assert (fourth.mathml, fourth.latex, fourth.position) == ("<math><mi>x</mi></math>", None, 9)
    assert (fifth.eq_id, fifth.doc_id) == ("17#0", "17")


def test_records_round_trip_through_the_writer(tmp_path: Path) -> None:
    records = [
        EquationRecord(
            eq_id="p#0",
            doc_id="p",
            position=0,
            latex="x^2",
            section="Intro",
            context="the square",
            source="s",
            extra={"year": 2003},
        ),
        EquationRecord(eq_id="p#1", doc_id="p", position=1, mathml="<math/>", source="s"),
    ]
    out = tmp_path / "out.jsonl"
    assert write_jsonl(records, out) == 2
    assert _run(out) == records


def test_gzip_input_and_output(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "eqs.jsonl.gz", [{"latex": "a"}, {"latex": "b"}])
    items = _run(path)
    assert [r.latex for r in items] == ["a", "b"]
    assert {r.doc_id for r in items} == {"eqs"}
    out = tmp_path / "copy.jsonl.gz"
    assert write_jsonl(items, out) == 2
    with gzip.open(out, "rt") as handle:
        assert [json.loads(line)["latex"] for line in handle] == ["a", "b"]


def test_writer_targets_stdout_text_and_binary_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = EquationRecord(eq_id="e", doc_id="d", position=0, latex="\u03b1")
    failure = Failure(eq_id="f", doc_id="d", stage="extract", reason="invalid-json")
    assert write_jsonl([record, failure], "-") == 2
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[0]) == record.to_dict()
    assert json.loads(lines[1])["failure"] is True
    text, binary = io.StringIO(), io.BytesIO()
    write_jsonl([record], text)
    write_jsonl([record], binary)
    assert text.getvalue().encode("utf-8") == binary.getvalue()
    assert "\u03b1" in text.getvalue()  # readable, not \\u escapes
    # a lone surrogate cannot be UTF-8: it is escaped instead of failing the batch
    odd = EquationRecord(eq_id="s", doc_id="d", position=0, latex="\ud800")
    write_jsonl([odd], binary)
    assert json.loads(binary.getvalue().splitlines()[-1])["latex"] == "\ud800"


# --- document lines --------------------------------------------------------------------------

DOCUMENT = (
    "We study the energy $E$ of the system. \\begin{equation}\\label{e1} E = mc^2 "
    "\\end{equation} which holds. Then \\begin{align} a &= b \\\\ c &= d \\end{align} "
    "and $$x^2$$ at the end."
)


def test_document_lines_yield_their_display_equations(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "docs.jsonl",
        [
            {"doc_id": "p1", "section": "Abstract", "text": DOCUMENT},
            {
                "id": 7,
                "body": "\\newcommand{\\R}{\\mathbb{R}}\\section{Intro} Let "
                "\\[ f: \\R \\to \\R \\] be smooth.",
            },
            {"doc_id": "none", "text": "no display math, only $x$ inline"},
            {"latex": "y", "doc_id": "eq"},
        ],
    )
    items = _run(path, context_chars=40)
    assert all(isinstance(item, EquationRecord) for item in items)
    p1 = [r for r in items if r.doc_id == "p1"]
    assert [(r.eq_id, r.position, r.latex) for r in p1] == [
        ("p1#0", 0, "E = mc^2"),
        ("p1#1", 1, "a = b"),
        ("p1#2", 2, "c = d"),
        ("p1#3", 3, "x^2"),
    ]
    assert [r.extra["env"] for r in p1] == ["equation", "align", "align", "$$"]
    assert {r.section for r in p1} == {"Abstract"}  # no \\section: the line's own section
    assert {r.source for r in p1} == {f"{path}:1"}
    first = p1[0]
    assert first.context.startswith("We study the energy E of the system.")
    assert "which holds" in first.context
    assert "mc" not in first.context  # the equation itself is not its own context
    assert all(len(r.context) <= 2 * 40 + 1 for r in p1)
    (seven,) = [r for r in items if r.doc_id == "7"]
    assert (seven.eq_id, seven.section) == ("7#0", "Intro")
    assert seven.latex == "f: \\mathbb{R}\\to \\mathbb{R}"  # the user's macro is expanded
    assert items[-1].eq_id == "eq#3"


# --- bad lines -------------------------------------------------------------------------------


def test_bad_lines_become_failures_with_line_numbers(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "bad.jsonl",
        [
            {"latex": "ok"},
            "{not json",
            "[1, 2]",
            b'{"latex": "caf\xe9"}',
            "",
            "   ",
            {"nothing": 1},
            {"latex": 5},
            {"latex": "x", "position": "3"},
            {"latex": "x", "position": True},
            {"latex": "x", "position": -1},
            {"latex": "  ", "mathml": ""},
            {"text": "Some $$x$$ text"},
            "[" * 100_000 + "]" * 100_000,
            "12",
            {"latex": "last"},
        ],
    )
    items = _run(path)
    assert [r.latex for r in items if isinstance(r, EquationRecord)] == ["ok", "last"]
    reasons = [(f.reason, f.detail.split(":")[0]) for f in _failures(items)]
    assert reasons == [
        ("invalid-json", "line 2"),
        ("not-an-object", "line 3"),
        ("invalid-utf8", "line 4"),
        ("unknown-shape", "line 7"),
        ("invalid-field", "line 8"),
        ("invalid-field", "line 9"),
        ("invalid-field", "line 10"),
        ("invalid-field", "line 11"),
        ("empty-equation", "line 12"),
        ("missing-doc-id", "line 13"),
        ("invalid-json", "line 14"),
        ("not-an-object", "line 15"),
    ]
    for failure in _failures(items):
        assert failure.stage == "extract"
        assert failure.doc_id == "bad"
        assert failure.source.startswith(f"{path}:")
        assert len(failure.excerpt) <= 120


def test_overlong_line_is_a_failure_and_reading_goes_on(tmp_path: Path) -> None:
    long_line = json.dumps({"latex": "x" * 5000})
    path = _write_lines(tmp_path / "long.jsonl", [{"latex": "a"}, long_line, {"latex": "b"}])
    items = _run(path, max_document_bytes=1000)
    assert isinstance(items[1], Failure)
    assert items[1].reason == "too-large"
    assert items[1].detail.startswith("line 2")
    assert [r.latex for r in items if isinstance(r, EquationRecord)] == ["a", "b"]
    # exactly at the limit is fine; the last line may lack its newline
    exact = json.dumps({"latex": "y" * 20})
    path.write_bytes(exact.encode() + b"\n" + exact.encode())
    assert [r.latex for r in _run(path, max_document_bytes=len(exact))] == ["y" * 20] * 2
    path.write_bytes(exact.encode())
    assert _run(path, max_document_bytes=len(exact) - 1)[0].reason == "too-large"


def test_byte_order_mark_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"latex": "a"}\r\n{"latex": "b"}\r\n')
    assert [r.latex for r in _run(path)] == ["a", "b"]


def test_unreadable_files_are_failures(tmp_path: Path) -> None:
    (missing,) = _run(tmp_path / "missing.jsonl")
    assert (missing.reason, missing.stage) == ("unreadable-source", "extract")
    corrupt = tmp_path / "corrupt.jsonl.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00garbage")
    (failure,) = _run(corrupt)
    assert failure.reason == "unreadable-source"
    truncated = tmp_path / "truncated.jsonl.gz"
    truncated.write_bytes(gzip.compress(b'{"latex": "a"}\n' * 1000)[:-30])
    items = _run(truncated)
    assert isinstance(items[-1], Failure) and items[-1].reason == "unreadable-source"
    assert all(isinstance(r, EquationRecord) for r in items[:-1])


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_random_byte_lines_never_raise(tmp_path_factory: pytest.TempPathFactory, lines) -> None:
    path = tmp_path_factory.mktemp("rnd") / "random.jsonl"
    path.write_bytes(b"\n".join(lines))
    items = list(iter_jsonl(path, IndexerSettings(max_document_bytes=150)))
    assert all(isinstance(item, EquationRecord | Failure) for item in items)
    for item in items:
        if isinstance(item, Failure):
            assert item.stage == "extract"
            assert item.detail.startswith("line ")


@hsettings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "latex",
                "mathml",
                "doc_id",
                "id",
                "position",
                "eq_id",
                "text",
                "body",
                "section",
                "context",
                "source",
                "extra",
            ]
        ),
        st.none()
        | st.booleans()
        | st.integers()
        | st.text(max_size=30)
        | st.lists(st.integers(), max_size=2)
        | st.dictionaries(st.text(max_size=3), st.integers()),
    )
)
def test_random_objects_never_raise(tmp_path_factory: pytest.TempPathFactory, obj) -> None:
    path = tmp_path_factory.mktemp("obj") / "objects.jsonl"
    path.write_text(json.dumps(obj) + "\n")
    items = list(iter_jsonl(path))
    assert all(isinstance(item, EquationRecord | Failure) for item in items)
