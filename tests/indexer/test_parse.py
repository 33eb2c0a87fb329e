"""The parse stage (Featuriser): one featurisation, failures as records, nothing raises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.hepth import bundled_sample_lines, iter_hepth
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.vocabulary import default_vocabulary

BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<math><mi>&lol3;</mi></math>"""


@pytest.fixture(scope="module")
def featuriser() -> Featuriser:
    return Featuriser()


def record(eq_id: str, latex: str | None = None, mathml: str | None = None) -> EquationRecord:
    return EquationRecord(eq_id=eq_id, doc_id="d", position=0, latex=latex, mathml=mathml)


def test_latex_and_equivalent_mathml_featurise_to_the_same_graph(featuriser: Featuriser) -> None:
    from_latex = featuriser.parse_latex(r"\frac{a}{b}+x^2")
    assert isinstance(from_latex, ParsedEquation)
    mathml = (
        '<math xmlns="http://www.w3.org/1998/Math/MathML"><semantics><mrow><mfrac><mi>a</mi>'
        "<mi>b</mi></mfrac><mo>+</mo><msup><mi>x</mi><mn>2</mn></msup></mrow>"
        '<annotation encoding="application/x-tex">\\frac{a}{b}+x^2</annotation></semantics></math>'
    )
    from_mathml = featuriser.parse_batch([record("m", mathml=mathml)])[0]
    assert isinstance(from_mathml, ParsedEquation)
    for name in ("tag_ids", "attr_ids", "char_ids", "positions", "parents"):
        assert np.array_equal(getattr(from_latex.graph, name), getattr(from_mathml.graph, name))
    assert from_latex.math_tokens == from_mathml.math_tokens
    assert "a|frac|b" in from_latex.math_tokens
    assert "x|sup|2" in from_latex.math_tokens
    assert from_latex.symbols["identifiers"] == ["a", "b", "x"]
    # BoW = sum of the one-hot rows; N nodes -> N tags counted
    assert from_latex.bow.sum() >= from_latex.graph.num_nodes
    assert np.array_equal(from_latex.bow, from_latex.graph.features().sum(0))
    assert from_latex.graph.vocab_hash == default_vocabulary().content_hash


def test_bad_inputs_become_failure_records_and_the_batch_carries_on(
    featuriser: Featuriser,
) -> None:
    batch = [
        record("ok-1", latex=r"E = mc^2"),
        record("braces", latex=r"\frac{a}{b"),
        record("huge", latex="x+" * 60_000),
        record("deep", latex="{" * 10_000 + "x" + "}" * 10_000),
        record("env", latex=r"\begin{tabbing} a \end{tabbing}"),
        record("bomb", mathml=BOMB),
        record("badxml", mathml="<math><mi>x</mo></math>"),
        record("surrogate", latex="a\udc80b"),
        record("empty"),
        record("ok-2", latex=r"\sum_{n=0}^\infty \frac{x^n}{n!}"),
    ]
    results = featuriser.parse_batch(batch)
    assert [r.eq_id for r in results] == [r.eq_id for r in batch]
    by_id = {r.eq_id: r for r in results}
    assert isinstance(by_id["ok-1"], ParsedEquation)
    assert isinstance(by_id["ok-2"], ParsedEquation)
    expected = {
        "braces": ("convert", "unbalanced-braces"),
        "huge": ("convert", "too-large"),
        "env": ("convert", "unknown-environment"),
        "bomb": ("convert", "forbidden-dtd"),
        "badxml": ("convert", "invalid-mathml"),
        "surrogate": ("convert", "invalid-utf8"),
        "empty": ("convert", "empty"),
    }
    for eq_id, (stage, reason) in expected.items():
        failure = by_id[eq_id]
        assert isinstance(failure, Failure), eq_id
        assert (failure.stage, failure.reason) == (stage, reason), eq_id
        assert failure.detail
    deep = by_id["deep"]
    assert isinstance(deep, Failure)
    assert deep.reason in {"too-deep", "too-large", "too-many-nodes"}


def test_strict_mode_turns_unknown_macros_into_failures() -> None:
    lenient = Featuriser().parse_latex(r"\nn a + \al")
    assert isinstance(lenient, ParsedEquation)
    assert lenient.unknown_macros == ["nn", "al"]
    strict = Featuriser(strict=True).parse_latex(r"\nn a + \al")
    assert isinstance(strict, Failure)
    assert strict.reason == "unknown-macro"


def test_bundled_real_equations_parse_with_at_least_97_percent_coverage(
    featuriser: Featuriser,
) -> None:
    records = [r for r in iter_hepth(bundled_sample_lines()) if isinstance(r, EquationRecord)]
    assert len(records) > 150
    results = featuriser.parse_batch(records)
    parsed = [r for r in results if isinstance(r, ParsedEquation)]
    assert len(parsed) / len(records) >= 0.97
    data = parsed[0].to_dict()
    assert data["eq_id"] == parsed[0].eq_id
    assert data["mathml"].startswith("<math")
    assert sum(count for _, count in data["bow"]) == parsed[0].bow.sum()


def test_parse_stream_passes_extraction_failures_through(featuriser: Featuriser) -> None:
    earlier = Failure(eq_id="x#0", doc_id="x", stage="extract", reason="macro-fragment")
    items = [record("a", latex="a"), earlier, record("b", latex="b")]
    out = list(featuriser.parse_stream(items, batch_size=10))
    assert [o.eq_id for o in out] == ["a", "x#0", "b"]
    assert out[1] is earlier


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=80), st.booleans())
def test_any_text_gives_a_parsed_equation_or_a_failure(text: str, as_mathml: bool) -> None:
    featuriser = _SHARED
    item = record("h", mathml=text) if as_mathml else record("h", latex=text)
    result = featuriser.parse_batch([item])[0]
    assert isinstance(result, ParsedEquation | Failure)


_SHARED = Featuriser()


def test_prefix_stage_is_optional_and_keeps_its_reason() -> None:
    featuriser = Featuriser(with_prefix=True)
    readable = featuriser.parse_latex(r"x^{2} + 1")
    assert isinstance(readable, ParsedEquation)
    assert readable.prefix is not None
    assert readable.prefix[0] == "+"
    assert "pow" in readable.prefix
    physics = featuriser.parse_latex(r"\langle \bar\psi \gamma^\mu \psi \rangle")
    assert isinstance(physics, ParsedEquation)  # the equation itself is fine
    assert physics.prefix is None
    assert physics.prefix_error == "sympy-unparsable"
    assert physics.to_dict()["prefix_error"] == "sympy-unparsable"
