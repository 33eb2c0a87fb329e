"""Regressions found by ``mathsearch bench fuzz``, each with its minimal input (docs/fuzzing.md)."""

from __future__ import annotations

import json
from pathlib import Path

from mathsearch.indexer.extract import extract
from mathsearch.indexer.hepth import iter_hepth, read_records
from mathsearch.indexer.jats_source import jats_records
from mathsearch.indexer.records import (
    MAX_ID_BYTES,
    EquationRecord,
    Failure,
    make_eq_id,
    scrub_surrogates,
    storable_id,
)
from mathsearch.indexer.settings import IndexerSettings

FUZZ = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "fuzz"


def test_hepth_trailing_lines_become_a_failure_record() -> None:
    """Lines after the last ``->YEAR/PAPER.tex`` marker were logged and dropped silently."""
    items = list(extract([str(FUZZ / "hepth-trailing.txt")], "hepth"))
    assert isinstance(items[0], EquationRecord) and items[0].latex == "a+b=c"
    assert isinstance(items[1], Failure)
    assert (items[1].reason, items[1].eq_id) == ("no-source-marker", "hepth-trailing#0")


def test_hepth_record_without_marker_is_bounded_and_too_large() -> None:
    """A marker-less flood is not buffered whole: the record keeps ``max_chars``."""
    lines = ["\\begin{equation} x+y \\\\\n"] * 200_000 + ["\\end{equation}->2003/0301001.tex\n"]
    (record,) = read_records(lines, max_chars=1000)
    assert len(record.raw) == 1000 and record.dropped > 4_000_000
    (item,) = iter_hepth(lines, IndexerSettings())
    assert isinstance(item, Failure) and item.reason == "too-large"
    assert list(read_records(["x\n"])) == []  # without ``trailing``: as before


def test_ids_over_the_opensearch_limit_are_shortened_deterministically() -> None:
    """One id over 512 bytes failed the validation of its whole bulk request (every item)."""
    long_doc = "d" * 1000
    eq_id = make_eq_id(long_doc, 3)
    assert len(eq_id.encode()) <= MAX_ID_BYTES and eq_id == make_eq_id(long_doc, 3)
    assert eq_id != make_eq_id(long_doc, 4)
    assert storable_id("").startswith("~") and storable_id("\u00e9" * 200).isprintable()
    assert len(storable_id("\u00e9" * 200).encode()) <= MAX_ID_BYTES


def test_jsonl_long_ids_and_bad_keywords() -> None:
    """``keywords: 5`` raised a TypeError in the write stage (the batch crashed)."""
    items = list(extract([str(FUZZ / "jsonl-bad-fields.jsonl")], "jsonl"))
    assert isinstance(items[0], Failure) and items[0].reason == "invalid-field"
    assert isinstance(items[1], EquationRecord) and len(items[1].eq_id.encode()) <= MAX_ID_BYTES
    assert isinstance(items[2], EquationRecord) and items[2].extra["keywords"] == ["a", "b"]


def test_surrogates_are_scrubbed_for_writing() -> None:
    """Lone surrogates (JSON escapes) in a failure excerpt crashed the bulk request."""
    line = json.loads('{"latex": "x\\ud800", "n": ["\\udfff", 1]}')
    clean = scrub_surrogates(line)
    assert clean == {"latex": "x\ufffd", "n": ["\ufffd", 1]}
    json.dumps(clean, ensure_ascii=False).encode("utf-8")


def test_jats_with_an_http_dtd_url_parses_without_fetching() -> None:
    """Older NLM articles cite ``http://dtd.nlm.nih.gov/...``; libxml2 refused them."""
    doctype = (
        '<!DOCTYPE article PUBLIC "-//NLM//DTD Journal Publishing DTD v3.0 20080202//EN" '
        '"http://dtd.nlm.nih.gov/publishing/3.0/journalpublishing3.dtd">'
    )
    formula = "<disp-formula><tex-math>x</tex-math></disp-formula>"
    data = f"{doctype}<article><p>&nbsp;{formula}</p></article>"
    (item,) = jats_records(data.encode(), "nlm")
    assert isinstance(item, EquationRecord) and item.latex == "x"
