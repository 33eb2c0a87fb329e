"""The format registry: a registered format is guessed and dispatched, an unknown one refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mathsearch.indexer.errors import UnknownFormat
from mathsearch.indexer.extract import FORMATS, check_sources, extract, guess_format
from mathsearch.indexer.formats import (
    FORMAT_REGISTRY,
    ExtractRun,
    SourceFormat,
    register_format,
    source_format,
)
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings

BUILT_IN = ("tex", "hepth", "jsonl", "jats", "opensearch")


def _read_lines(source: str, run: ExtractRun) -> Iterator[EquationRecord | Failure]:
    """A toy format: one LaTeX equation per line; counts its sources in the run's state."""
    seen = run.state.setdefault("lines", [])
    seen.append(source)
    doc = Path(source).stem
    for position, line in enumerate(Path(source).read_text(encoding="utf-8").splitlines()):
        yield EquationRecord(f"{doc}#{position}", doc, position, latex=line, source=source)


@pytest.fixture
def lines_format() -> Iterator[SourceFormat]:
    fmt = register_format(SourceFormat("lines", _read_lines, (".eqs", ".eqs.gz")))
    try:
        yield fmt
    finally:
        FORMAT_REGISTRY.pop(fmt.name)


def test_the_built_in_formats_keep_their_names_and_order() -> None:
    assert tuple(FORMATS) == BUILT_IN
    assert (
        source_format("opensearch").sources == "index" and not source_format("opensearch").suffixes
    )
    assert [f.name for f in FORMAT_REGISTRY.values() if f.folders] == ["tex"]


def test_a_registered_format_is_guessed_and_dispatched(
    lines_format: SourceFormat, tmp_path: Path
) -> None:
    first, second = tmp_path / "one.eqs", tmp_path / "two.eqs"
    first.write_text("x^2\n\\alpha + 1\n", encoding="utf-8")
    second.write_text("y = mx + b\n", encoding="utf-8")
    assert "lines" in FORMATS  # the --format choices follow the registry
    assert guess_format(str(first)) == "lines"
    assert guess_format("archive.eqs.gz") == "lines"  # the longest matching suffix wins
    assert guess_format("archive.gz") == "tex"
    assert check_sources([str(first)]) == {str(first): "lines"}

    records = list(extract([str(first), str(second)], settings=IndexerSettings()))
    assert [(r.eq_id, r.latex) for r in records if isinstance(r, EquationRecord)] == [
        ("one#0", "x^2"),
        ("one#1", "\\alpha + 1"),
        ("two#0", "y = mx + b"),
    ]
    forced = list(extract([str(first)], "lines", IndexerSettings()))
    assert [r.eq_id for r in forced] == ["one#0", "one#1"]
    # a missing file is still a failure record before any reader runs
    [missing] = extract([str(tmp_path / "gone.eqs")], "lines", IndexerSettings())
    assert isinstance(missing, Failure) and missing.reason == "missing-source"


def test_readers_share_state_across_one_call_only(
    lines_format: SourceFormat, tmp_path: Path
) -> None:
    source = tmp_path / "a.eqs"
    source.write_text("x\n", encoding="utf-8")
    run = ExtractRun(IndexerSettings())
    list(lines_format.reader(str(source), run))
    list(lines_format.reader(str(source), run))
    assert run.state["lines"] == [str(source), str(source)]
    assert ExtractRun(IndexerSettings()).state == {}


def test_an_unknown_format_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    article = tmp_path / "article.xml"
    article.write_text("<article/>", encoding="utf-8")
    known = ", ".join(BUILT_IN)
    with pytest.raises(UnknownFormat, match=f"unknown format 'docbook': use one of {known}"):
        list(extract([str(article)], "docbook", IndexerSettings()))
    with pytest.raises(UnknownFormat, match="'docbook'") as caught:
        check_sources([str(article)], "docbook")
    assert caught.value.reason == "unknown-format"
    with pytest.raises(UnknownFormat, match=known):
        source_format("docbook")
    # a name no format claims is not read as JATS (or anything else)
    odd = tmp_path / "notes.docbook"
    odd.write_text("<book/>", encoding="utf-8")
    with pytest.raises(UnknownFormat, match="cannot tell the format"):
        list(extract([str(odd)], settings=IndexerSettings()))


def test_an_index_format_needs_a_client() -> None:
    with pytest.raises(ValueError, match="reads an index through a client"):
        list(extract(["equations"], "opensearch", IndexerSettings()))
    assert check_sources(["no-such-index"], "opensearch") == {"no-such-index": "opensearch"}


@pytest.mark.parametrize(
    ("fmt", "why"),
    [
        (SourceFormat("tex", _read_lines, (".eqs",)), "already registered"),
        (SourceFormat("lines", _read_lines, (".tar.gz",)), "'.tar.gz' is tex's"),
        (SourceFormat("lines", _read_lines, ("eqs",)), "lower-case '.ending'"),
        (SourceFormat("lines", _read_lines, (".EQS",)), "lower-case '.ending'"),
        (SourceFormat("lines", _read_lines, folders=True), "folders are already"),
    ],
)
def test_registration_refuses_a_clash(fmt: SourceFormat, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        register_format(fmt)
    assert tuple(FORMATS) == BUILT_IN
