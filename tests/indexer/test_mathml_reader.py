"""parse_mathml: KaTeX MathML and HTML, namespaces, fragments, and safety against hostile input."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.errors import IndexerError, LimitExceeded, MathMLError
from mathsearch.indexer.mathml_reader import parse_mathml
from mathsearch.indexer.mathml_tree import MathNode
from mathsearch.indexer.settings import IndexerSettings

RESOURCES = Path(__file__).parent.parent / "resources" / "indexer"
KATEX_FRAC = (
    '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><semantics><mrow><mfrac>'
    '<mi>a</mi><mi>b</mi></mfrac></mrow><annotation encoding="application/x-tex">\\frac{a}{b}'
    "</annotation></semantics></math>"
)
FRAC_TREE = MathNode(
    "math",
    children=[
        MathNode(
            "mrow",
            children=[
                MathNode("mfrac", children=[MathNode("mi", text="a"), MathNode("mi", text="b")])
            ],
        )
    ],
)
BIG = IndexerSettings(max_equation_chars=10_000_000, max_nodes=10_000_000)


def _math(*children: MathNode) -> MathNode:
    return MathNode("math", children=list(children))


# -- what loads ---------------------------------------------------------------------------------


def test_plain_mathml_without_namespace() -> None:
    tree = parse_mathml("<math><msup><mi>x</mi><mn>2</mn></msup></math>")
    assert tree == _math(
        MathNode("msup", children=[MathNode("mi", text="x"), MathNode("mn", text="2")])
    )


def test_katex_mathml_unwraps_semantics_and_drops_annotation_and_root_attributes() -> None:
    tree = parse_mathml(KATEX_FRAC)
    assert tree == FRAC_TREE
    assert tree.attrs is None
    assert all(node.tag not in {"semantics", "annotation"} for node in tree.iter())


def test_katex_html_output_fixture() -> None:
    html = (RESOURCES / "katex_frac_display.html").read_text(encoding="utf-8")
    assert parse_mathml(html) == FRAC_TREE
    assert parse_mathml(html.encode("utf-8")) == FRAC_TREE


def test_html_entities_outside_and_inside_math() -> None:
    html = (
        '<span class="katex">&nbsp;<span class="katex-mathml">'
        "<math><mi>x</mi><mo>&InvisibleTimes;</mo><mi>y</mi><mtext>&nbsp;</mtext>"
        "<mo>&lt;</mo></math></span><span>&copy; &nbsp;<br></span></span>"
    )
    tree = parse_mathml(html)
    assert [(node.tag, node.text) for node in tree.children] == [
        ("mi", "x"),
        ("mo", "\u2062"),
        ("mi", "y"),
        ("mtext", "\u00a0"),
        ("mo", "<"),
    ]


def test_first_math_element_is_taken() -> None:
    text = "<div><math><mi>a</mi></math><p>and</p><math><mi>b</mi></math></div>"
    assert parse_mathml(text) == _math(MathNode("mi", text="a"))


def test_prefixed_mathml_with_and_without_declaration() -> None:
    declared = (
        '<mml:math xmlns:mml="http://www.w3.org/1998/Math/MathML"><mml:mi>x</mml:mi>'
        "<mml:mo>+</mml:mo></mml:math>"
    )
    undeclared = "<mml:math><mml:mi>x</mml:mi><mml:mo>+</mml:mo></mml:math>"
    expected = _math(MathNode("mi", text="x"), MathNode("mo", text="+"))
    assert parse_mathml(declared) == expected
    assert parse_mathml(undeclared) == expected
    assert parse_mathml("<math><mi>x</mi><mo>+</mo></math>") == expected


def test_jats_formula_with_prefix_declared_on_the_article() -> None:
    tree = parse_mathml((RESOURCES / "jats_formula.xml").read_bytes())
    assert tree.attrs is None  # id, display, overflow of the root are dropped
    (row,) = tree.children
    assert [child.tag for child in row.children] == ["mi", "mo", "mi", "msup"]
    assert row.text is None  # indentation whitespace is not text
    assert row.children[3] == MathNode(
        "msup", children=[MathNode("mi", text="c"), MathNode("mn", text="2")]
    )


def test_bare_element_and_fragments_are_wrapped() -> None:
    row = MathNode("mrow", children=[MathNode("mi", text="x")])
    assert parse_mathml("<mrow><mi>x</mi></mrow>") == _math(row)
    assert parse_mathml("<mi>x</mi><mo>=</mo><mn>1</mn>") == _math(
        MathNode("mi", text="x"), MathNode("mo", text="="), MathNode("mn", text="1")
    )


def test_attributes_kept_with_local_names_except_on_the_root() -> None:
    tree = parse_mathml(
        '<math display="block" xmlns:xlink="http://www.w3.org/1999/xlink">'
        '<mi mathvariant="bold" xlink:href="#a">x</mi><mspace width="0.2778em"/></math>'
    )
    assert tree.attrs is None
    assert tree.children[0].attrs == {"mathvariant": "bold", "href": "#a"}
    assert tree.children[1] == MathNode("mspace", {"width": "0.2778em"})


def test_nested_semantics_and_annotation_xml_dropped_anywhere() -> None:
    text = (
        "<math><mrow><semantics><mi>x</mi><annotation-xml encoding='MathML-Content'>"
        "<ci>x</ci></annotation-xml></semantics><annotation>junk</annotation>"
        "<mo>+</mo></mrow></math>"
    )
    row = MathNode("mrow", children=[MathNode("mi", text="x"), MathNode("mo", text="+")])
    assert parse_mathml(text) == _math(row)


def test_content_mathml_is_just_elements() -> None:
    tree = parse_mathml("<math><apply><plus/><ci>x</ci><cn>1</cn></apply></math>")
    assert tree == _math(
        MathNode(
            "apply",
            children=[MathNode("plus"), MathNode("ci", text="x"), MathNode("cn", text="1")],
        )
    )


def test_text_is_trimmed_collapsed_and_nfc() -> None:
    tree = parse_mathml(
        "<math><mi> x </mi><mtext>if \n  and</mtext><mtext>  </mtext><mi>e\u0301</mi></math>"
    )
    assert [node.text for node in tree.children] == ["x", "if and", None, "\u00e9"]


def test_mixed_content_text_is_concatenated() -> None:
    tree = parse_mathml("<math><mtext>a<mglyph/>b</mtext></math>")
    assert tree.children[0] == MathNode("mtext", text="ab", children=[MathNode("mglyph")])


def test_comments_processing_instructions_and_xml_declaration() -> None:
    data = (
        b'\xef\xbb\xbf<?xml version="1.0" encoding="UTF-8"?>'
        b"<math><!-- c --><?pi x?><mi>x</mi></math>"
    )
    assert parse_mathml(data) == _math(MathNode("mi", text="x"))
    assert parse_mathml('<?xml version="1.0"?><mi>y</mi>') == _math(MathNode("mi", text="y"))


def test_real_katex_equation_fixture() -> None:
    tree = parse_mathml((RESOURCES / "katex_sum.xml").read_text(encoding="utf-8"))
    (row,) = tree.children
    assert len(row.children) == 15
    assert row.children[-1] == MathNode("mi", {"mathvariant": "normal"}, text="Δ")
    assert row.children[-2] == MathNode("mspace", {"width": "0.2778em"})


# -- what is refused ----------------------------------------------------------------------------


def _refused(text: str | bytes, error: type, reason: str, **limits: int) -> None:
    started = time.perf_counter()
    with pytest.raises(error) as caught:
        parse_mathml(text, IndexerSettings(**limits) if limits else None)
    assert caught.value.reason == reason
    assert time.perf_counter() - started < 2.0


BILLION_LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">'
        for i in range(1, 10)
    )
    + "]><math><mi>&lol9;</mi></math>"
)


def test_billion_laughs_is_refused_before_parsing() -> None:
    _refused(BILLION_LAUGHS, MathMLError, "forbidden-dtd")
    _refused(BILLION_LAUGHS.encode(), MathMLError, "forbidden-dtd")


def test_external_entity_and_doctype_are_refused() -> None:
    xxe = '<!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]><math><mi>&x;</mi></math>'
    _refused(xxe, MathMLError, "forbidden-dtd")
    _refused("<!doctype html><math><mi>x</mi></math>", MathMLError, "forbidden-dtd")
    _refused("<math><mi>&undefined;</mi></math>", MathMLError, "invalid-mathml")


def test_deep_nesting() -> None:
    deep = "<mrow>" * 10_000 + "<mi>x</mi>" + "</mrow>" * 10_000
    _refused(deep, LimitExceeded, "too-large")  # 130 KB: refused by size first
    _refused(deep, LimitExceeded, "too-deep", max_equation_chars=1_000_000)  # libxml2's limit
    middle = "<mrow>" * 200 + "<mi>x</mi>" + "</mrow>" * 200  # deeper than max_depth=128
    _refused(middle, LimitExceeded, "too-deep")
    assert parse_mathml("<mrow>" * 100 + "</mrow>" * 100).depth() == 101


def test_size_and_node_limits() -> None:
    _refused("<math>" + "<mi>x</mi>" * 10_000 + "</math>", LimitExceeded, "too-large")
    _refused("x" * 10_000_000, LimitExceeded, "too-large")
    _refused(
        "<math>" + "<mi>x</mi>" * 5_000 + "</math>",
        LimitExceeded,
        "too-many-nodes",
        max_equation_chars=100_000,
    )
    _refused(
        "<math><mtext>" + "a" * 50 + "</mtext></math>",
        LimitExceeded,
        "too-many-nodes",
        max_nodes=40,
    )
    assert parse_mathml(
        "<math><mtext>" + "a" * 38 + "</mtext></math>", IndexerSettings(max_nodes=40)
    )


def test_malformed_inputs() -> None:
    for bad in [
        "",
        "   ",
        "x + 1",
        "<math><mi>x</math>",
        "<math>",
        "<mi>x</mi></mrow>",
        "\x00<mi/>",
        "<mi>\ud800</mi>",
        "<math><mi>x</mi><</math>",
    ]:
        with pytest.raises(MathMLError) as caught:
            parse_mathml(bad)
        assert caught.value.reason == "invalid-mathml", bad


def test_invalid_utf8_bytes() -> None:
    _refused(b"<math><mi>\xff\xfe</mi></math>", MathMLError, "invalid-mathml")
    _refused(b"\xc3(", MathMLError, "invalid-mathml")


def test_wrong_input_type() -> None:
    with pytest.raises(TypeError):
        parse_mathml(42)  # type: ignore[arg-type]


# -- properties ---------------------------------------------------------------------------------

_XMLISH = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "<math>",
                "</math>",
                "<mi>",
                "</mi>",
                "<mrow>",
                "</mrow>",
                "<mml:mo>",
                "</mml:mo>",
                "<semantics>",
                "<annotation>",
                "&amp;",
                "&nbsp;",
                "&x;",
                "<!--",
                "-->",
                "<![CDATA[",
                "]]>",
                "<?",
                "?>",
                "<!DOCTYPE",
                "<mspace/>",
                'a="1"',
                "<",
                ">",
                "/",
            ]
        ),
        st.text(max_size=5),
    ),
    max_size=30,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), _XMLISH, st.binary(max_size=100)))
def test_random_input_raises_only_indexer_errors(text: str | bytes) -> None:
    try:
        tree = parse_mathml(text)
    except IndexerError:
        return
    assert tree.tag == "math"
