"""The pure-Python LaTeX -> MathML converter: golden outputs, errors, limits, properties."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.errors import ConversionError, IndexerError, LimitExceeded
from mathsearch.indexer.hepth import bundled_sample_lines, read_records
from mathsearch.indexer.latex_to_mathml import latex_to_mathml, tokenize
from mathsearch.indexer.mathml_tree import to_mathml
from mathsearch.indexer.settings import IndexerSettings

SETTINGS = IndexerSettings()
NS = '<math xmlns="http://www.w3.org/1998/Math/MathML">'


def mml(latex: str, strict: bool = False) -> str:
    """The MathML without the math/mrow wrapper the converter always puts around."""
    text = to_mathml(latex_to_mathml(latex, SETTINGS, strict=strict).tree, display=False)
    assert text.startswith(NS + "<mrow>") and text.endswith("</mrow></math>")
    return text[len(NS) + len("<mrow>") : -len("</mrow></math>")]


@pytest.mark.parametrize(
    ("latex", "expected"),
    [
        (r"\frac{a}{b}", "<mfrac><mi>a</mi><mi>b</mi></mfrac>"),
        (r"{a \over b+1}", "<mfrac><mi>a</mi><mrow><mi>b</mi><mo>+</mo><mn>1</mn></mrow></mfrac>"),
        ("x^2_i", "<msubsup><mi>x</mi><mi>i</mi><mn>2</mn></msubsup>"),
        ("x^12", "<msup><mi>x</mi><mn>1</mn></msup><mn>2</mn>"),
        ("3.14 r", "<mn>3.14</mn><mi>r</mi>"),
        (r"\alpha\Gamma", '<mi>α</mi><mi mathvariant="normal">Γ</mi>'),
        (r"\sqrt[3]{x}", "<mroot><mi>x</mi><mn>3</mn></mroot>"),
        (r"\sqrt x", "<msqrt><mi>x</mi></msqrt>"),
        (
            r"\sum_{i=1}^n",
            "<munderover><mo>∑</mo><mrow><mi>i</mi><mo>=</mo><mn>1</mn></mrow>"
            "<mi>n</mi></munderover>",
        ),
        (r"\int_0^1", "<msubsup><mo>∫</mo><mn>0</mn><mn>1</mn></msubsup>"),
        (r"\sin x", "<mi>sin</mi><mo>\u2061</mo><mi>x</mi>"),
        (
            r"\lim_{x\to 0}",
            "<munder><mi>lim</mi><mrow><mi>x</mi><mo>→</mo><mn>0</mn></mrow>"
            "</munder><mo>\u2061</mo>",
        ),
        (
            r"\left( x \right]",
            '<mrow><mo fence="true">(</mo><mi>x</mi><mo fence="true">]</mo></mrow>',
        ),
        (r"\hat{x}", '<mover accent="true"><mi>x</mi><mo>^</mo></mover>'),
        (r"\mathrm{Tr}\,M", '<mi mathvariant="normal">Tr</mi><mspace width="0.1667em"/><mi>M</mi>'),
        (r"{\rm d}x", '<mi mathvariant="normal">d</mi><mi>x</mi>'),
        (r"{\cal L}", '<mi mathvariant="script">L</mi>'),
        (r"\text{for all } x", "<mtext>for all</mtext><mi>x</mi>"),
        (
            "f'(x)",
            '<msup><mi>f</mi><mo lspace="0em" rspace="0em">′</mo></msup>'
            '<mo stretchy="false">(</mo><mi>x</mi><mo stretchy="false">)</mo>',
        ),
        (
            r"n \choose k",
            '<mrow><mo fence="true">(</mo><mfrac linethickness="0px"><mi>n</mi>'
            '<mi>k</mi></mfrac><mo fence="true">)</mo></mrow>',
        ),
        (
            r"\begin{pmatrix} a & b \\ c & d \end{pmatrix}",
            '<mrow><mo fence="true">(</mo><mtable><mtr><mtd><mi>a</mi></mtd><mtd><mi>b</mi></mtd>'
            "</mtr><mtr><mtd><mi>c</mi></mtd><mtd><mi>d</mi></mtd></mtr></mtable>"
            '<mo fence="true">)</mo></mrow>',
        ),
        (
            r"\begin{array}{cc} 1 & 2 \\ \end{array}",
            "<mtable><mtr><mtd><mn>1</mn></mtd><mtd><mn>2</mn></mtd></mtr></mtable>",
        ),
        (r"\not= \neq", "<mo>=\u0338</mo><mo>≠</mo>"),
        (r"a \label{eq:1} \nonumber", "<mi>a</mi>"),
        (
            r"\stackrel{def}{=}",
            "<mover><mo>=</mo><mrow><mi>d</mi><mi>e</mi><mi>f</mi></mrow></mover>",
        ),
    ],
)
def test_golden_outputs(latex: str, expected: str) -> None:
    assert mml(latex) == expected


def test_unknown_macros_are_kept_and_listed_or_fail_in_strict_mode() -> None:
    result = latex_to_mathml(r"\nn a \al + \alpha", SETTINGS)
    assert result.unknown_macros == ["nn", "al"]
    assert '<mi mathvariant="normal">\\al</mi>' in to_mathml(result.tree)
    with pytest.raises(ConversionError) as caught:
        latex_to_mathml(r"a + \undefinedthing", SETTINGS, strict=True)
    assert caught.value.reason == "unknown-macro"


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        (r"\frac{a}{b", "unbalanced-braces"),
        (r"a}+b", "unbalanced-braces"),
        (r"\frac{a}", "missing-argument"),
        (r"x^", "missing-argument"),
        (r"\begin{foo} a \end{foo}", "unknown-environment"),
        (r"\begin{array}{c} a \end{matrix}", "mismatched-environment"),
        (r"\begin{array}{c} a", "mismatched-environment"),
        (r"a \end{array}", "mismatched-environment"),
        (r"#1 + x", "macro-parameter"),
        ("a\ud800b", "invalid-utf8"),
        (b"\\frac{a}{\xff}", "invalid-utf8"),
    ],
)
def test_malformed_latex_gives_a_typed_error_with_its_reason(latex: str, reason: str) -> None:
    with pytest.raises(ConversionError) as caught:
        latex_to_mathml(latex, SETTINGS)
    assert caught.value.reason == reason


def test_limits_bound_size_depth_and_tokens() -> None:
    with pytest.raises(LimitExceeded) as big:
        latex_to_mathml("x+" * 60_000, SETTINGS)
    assert big.value.reason == "too-large"
    with pytest.raises(LimitExceeded):  # 10,000-deep nesting: stopped by a limit, not a crash
        latex_to_mathml(
            "{" * 10_000 + "x" + "}" * 10_000, IndexerSettings(max_equation_chars=30_000)
        )
    with pytest.raises(LimitExceeded) as deep:
        latex_to_mathml("{" * 1000 + "x" + "}" * 1000, SETTINGS)
    assert deep.value.reason == "too-deep"
    with pytest.raises(LimitExceeded) as deep_frac:
        latex_to_mathml(r"\frac{1}" * 300 + "{x}", SETTINGS)
    assert deep_frac.value.reason == "too-deep"
    with pytest.raises(LimitExceeded) as many:
        latex_to_mathml("x " * 5000, SETTINGS)
    assert many.value.reason == "too-many-nodes"


def test_tokenizer_keeps_control_words_numbers_and_drops_comments() -> None:
    assert tokenize(r"\frac12 % note") == ["\\frac", "12", " "]
    assert tokenize(r"a\\b\,c") == ["a", "\\\\", "b", "\\,", "c"]


def test_bundled_real_equations_convert() -> None:
    bodies = []
    for record in read_records(bundled_sample_lines()):
        match = re.match(r"\s*\\begin\{(equation\*?)\}(.*)\\end\{\1\}\s*$", record.raw, re.S)
        if match and not re.search(r"\\(?:newcommand|def)\b|#\d", match.group(2)):
            bodies.append(re.sub(r"\\label\{[^}]*\}", "", match.group(2)))
    assert len(bodies) > 100
    converted = 0
    for body in bodies:
        try:
            latex_to_mathml(body, SETTINGS)
            converted += 1
        except IndexerError:
            pass
    assert converted / len(bodies) >= 0.97


def _real_equations() -> list[str]:
    path = Path(__file__).resolve().parents[2] / "indexer" / "resources" / "hepth2003-sample.txt"
    text = path.read_text("utf-8")
    return [
        m.group(1) for m in re.finditer(r"\\begin\{equation\}(.*?)\\end\{equation\}", text, re.S)
    ]


REAL = _real_equations()
ALPHABET = st.sampled_from(
    [
        *list("{}[]()^_&\\$#%'~ ,.+-=ax1"),
        r"\frac",
        r"\left",
        r"\right",
        r"\begin{array}",
        r"\end{array}",
        r"\over",
        r"\sqrt",
        r"\\",
        r"\mathrm",
        r"\text{",
        r"\alpha",
        r"\big",
        r"\hat",
        "\x00",
        "é",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=60).map("".join))
def test_random_latex_never_raises_anything_but_indexer_errors(latex: str) -> None:
    try:
        result = latex_to_mathml(latex, SETTINGS)
    except IndexerError:
        return
    assert to_mathml(result.tree).startswith("<math")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL), st.data())
def test_mutated_real_equations_never_raise_anything_but_indexer_errors(
    equation: str, data: st.DataObject
) -> None:
    position = data.draw(st.integers(0, len(equation)))
    cut = data.draw(st.integers(0, 5))
    insert = data.draw(ALPHABET)
    mutated = equation[:position] + insert + equation[position + cut :]
    with contextlib.suppress(IndexerError):
        latex_to_mathml(mutated, SETTINGS)
