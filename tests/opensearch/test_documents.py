"""Which stored fields an equation document keeps (pure: no cluster)."""

from __future__ import annotations

from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord
from mathsearch.opensearch.documents import equation_source, keeps_mathml

MATHML = (
    '<math xmlns="http://www.w3.org/1998/Math/MathML"><mrow><mfrac><mi>a</mi><mi>b</mi>'
    "</mfrac><mo>+</mo><msup><mi>x</mi><mn>2</mn></msup></mrow></math>"
)


def _parsed(latex: str | None = None, mathml: str | None = None) -> dict[str, object]:
    record = EquationRecord(eq_id="d#0", doc_id="d", position=0, latex=latex, mathml=mathml)
    parsed = Featuriser().parse_batch([record])[0]
    assert isinstance(parsed, ParsedEquation)
    return parsed.to_dict()


def test_latex_input_is_stored_without_its_rendered_mathml() -> None:
    parsed = _parsed(latex=r"\frac{a}{b}+x^2")
    assert parsed["input_format"] == "latex" and str(parsed["mathml"]).startswith("<math")
    source = equation_source(parsed)
    assert source["mathml"] == "" and source["latex"] == r"\frac{a}{b}+x^2"
    assert source["math_tokens"]  # the rest of the document is unchanged


def test_mathml_input_keeps_its_mathml_also_with_an_alttext() -> None:
    for latex in (None, r"\frac{a}{b}+x^2"):  # JATS may carry both
        parsed = _parsed(latex=latex, mathml=MATHML)
        assert parsed["input_format"] == "mathml"
        assert equation_source(parsed)["mathml"] == parsed["mathml"] != ""


def test_records_from_before_the_flag_keep_mathml_only_without_latex() -> None:
    assert keeps_mathml({"mathml": MATHML, "latex": ""})
    assert not keeps_mathml({"mathml": MATHML, "latex": "x"})
    assert keeps_mathml({"mathml": MATHML, "latex": "x", "input_format": "mathml"})
    assert not keeps_mathml({"mathml": MATHML, "latex": "", "input_format": "latex"})
