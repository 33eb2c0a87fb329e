"""MathML rendered for hits whose index keeps only the LaTeX (pure: no cluster)."""

from __future__ import annotations

import pytest

from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.opensearch.mathml_display import MathMLRenderer
from mathsearch.opensearch.results import Hit


def test_rendering_gives_the_mathml_the_indexer_produced() -> None:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    parsed = [p for p in Featuriser().parse_batch(records[:60]) if isinstance(p, ParsedEquation)]
    assert len(parsed) > 50
    hits = [Hit(rank=i, eq_id=p.eq_id, doc_id="", score=0.0, latex=p.record.latex or "")
            for i, p in enumerate(parsed, start=1)]  # fmt: skip
    MathMLRenderer().fill(hits)
    assert [hit.mathml for hit in hits] == [p.mathml for p in parsed]


def test_stored_mathml_is_kept_and_unreadable_latex_gives_none() -> None:
    renderer = MathMLRenderer()
    stored = Hit(rank=1, eq_id="a", doc_id="", score=1.0, latex="x", mathml="<math>kept</math>")
    broken = Hit(rank=2, eq_id="b", doc_id="", score=0.5, latex=r"\frac{a}{")
    empty = Hit(rank=3, eq_id="c", doc_id="", score=0.1)
    renderer.fill([stored, broken, empty])
    assert (stored.mathml, broken.mathml, empty.mathml) == ("<math>kept</math>", "", "")
    source = renderer.fill_source({"latex": "x^2", "mathml": ""})
    assert source["mathml"] == renderer.render("x^2") and "<msup>" in source["mathml"]
    assert renderer.fill_source({"latex": "x", "mathml": "<math/>"})["mathml"] == "<math/>"


def test_katex_converter_renders_a_page_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # the configured converter renders: with katex the same MathML the katex indexer stores
    monkeypatch.setenv("MATHSEARCH_CONVERTER", "katex")
    latexes = [r"\frac{a}{b}+x^2", r"\sqrt{\alpha}", r"\frac{a}{"]
    from mathsearch.indexer.converters import make_converter
    from mathsearch.indexer.mathml_tree import to_mathml

    converter = make_converter()
    try:
        expected = [to_mathml(r.tree) if hasattr(r, "tree") else "" for r in
                    converter.convert_batch(latexes)]  # fmt: skip
    finally:
        converter.close()
    renderer = MathMLRenderer()
    hits = [Hit(rank=i, eq_id=str(i), doc_id="", score=0.0, latex=x) for i, x in enumerate(latexes)]
    renderer.fill(hits)
    assert [hit.mathml for hit in hits] == expected
    assert "<mfrac>" in hits[0].mathml and "<msqrt>" in hits[1].mathml and hits[2].mathml == ""
    renderer.close()
