"""JATS extraction: the sample article, id fallbacks, folders, and every hostile input."""

from __future__ import annotations

import gzip
import json
import shutil
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from lxml import etree

from mathsearch.indexer.jats_source import clean_tex_math, iter_jats, jats_records
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings

SAMPLE = Path(__file__).parent.parent / "resources" / "indexer" / "jats-article.xml"
MML = "http://www.w3.org/1998/Math/MathML"
DOI = "10.1234/jmps.2019.0042"

ARTICLE = """<?xml version="1.0" encoding="UTF-8"?>
<article xmlns:mml="http://www.w3.org/1998/Math/MathML">
<front><article-meta>{ids}</article-meta></front>
<body><sec><title>Only</title><p>Before <disp-formula><tex-math>x+1</tex-math></disp-formula>
after.</p></sec></body></article>
"""


def _run(path: Path, **kwargs: int) -> list[EquationRecord | Failure]:
    return list(iter_jats(path, IndexerSettings(**kwargs)))


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def _dump(items: list[EquationRecord | Failure]) -> str:
    """Every field a consumer would see, except the file path (chosen by the test)."""
    rows = []
    for item in items:
        row = item.to_dict()
        row.pop("source", None)
        rows.append(row)
    return json.dumps(rows, ensure_ascii=False)


def _single_failure(items: list[EquationRecord | Failure], reason: str) -> Failure:
    assert len(items) == 1, items
    failure = items[0]
    assert isinstance(failure, Failure)
    assert failure.stage == "extract"
    assert failure.reason == reason, failure
    assert failure.detail
    return failure


# --- the sample article ---------------------------------------------------------------------


def test_sample_article_yields_three_equations_in_document_order() -> None:
    records = _run(SAMPLE, context_chars=80)
    assert all(isinstance(r, EquationRecord) for r in records)
    assert [r.position for r in records] == [0, 1, 2]
    assert [r.eq_id for r in records] == [f"{DOI}#0", f"{DOI}#1", f"{DOI}#2"]
    assert {r.doc_id for r in records} == {DOI}  # doi beats pmc and pmid
    assert [r.section for r in records] == ["Introduction", "Introduction", "Decay of the energy"]
    assert [r.extra.get("xml_id") for r in records] == ["eq1", "eq2", "eq3"]
    assert all(r.source == str(SAMPLE) for r in records)


def test_mathml_is_serialised_with_its_namespace() -> None:
    first, _, third = _run(SAMPLE)
    assert first.latex is None
    for record in (first, third):
        assert 'xmlns:mml="http://www.w3.org/1998/Math/MathML"' in record.mathml
        assert "xlink" not in record.mathml  # unused ancestor namespaces are dropped
        math = etree.fromstring(record.mathml)
        assert math.tag == f"{{{MML}}}math"
        assert math.get("display") == "block"
    identifiers = etree.fromstring(first.mathml).iter(f"{{{MML}}}mi")
    assert [mi.text for mi in identifiers] == ["E", "m", "v", "V"]


def test_tex_math_document_wrapper_and_dollars_are_stripped() -> None:
    _, second, _ = _run(SAMPLE)
    assert second.mathml is None
    assert second.latex == r"m\ddot{x} + \gamma \dot{x} + k x = 0"


def test_alternatives_give_both_latex_and_mathml() -> None:
    third = _run(SAMPLE)[2]
    assert third.latex == r"\frac{dE}{dt} = -\gamma \dot{x}^2"
    assert "\u03b3" in third.mathml  # the character reference became the character
    assert "graphic" not in third.mathml


def test_context_is_the_paragraph_around_the_formula_within_the_window() -> None:
    first, second, third = _run(SAMPLE, context_chars=60)
    assert "The total energy" not in first.context  # the text before is cut at 60 chars
    assert "in a potential V is" in first.context
    assert "which is conserved" in first.context
    assert "E = 1 2" not in first.context and "(1)" not in first.context
    assert "equation of motion reads" in second.context
    assert "energy decays monotonically" in second.context
    # windows end on word boundaries: "Differentiating" would be cut, so it is left out
    assert third.context == (
        "along solutions gives the dissipation identity "
        "so that the energy is non-increasing in time."
    )
    for record in (first, second, third):
        assert len(record.context) <= 2 * 60 + 1
    wide = _run(SAMPLE, context_chars=400)[2]
    assert wide.context == (
        "Differentiating along solutions gives the dissipation identity "
        "so that the energy is non-increasing in time."
    )
    assert all(r.context == "" for r in _run(SAMPLE, context_chars=0))


def test_gzipped_file_and_folder(tmp_path: Path) -> None:
    folder = tmp_path / "articles"
    (folder / "nested").mkdir(parents=True)
    shutil.copy(SAMPLE, folder / "a.xml")
    with gzip.open(folder / "nested" / "b.xml.gz", "wb") as handle:
        handle.write(ARTICLE.format(ids="").encode())
    (folder / "notes.txt").write_text("not an article")
    items = _run(folder)
    assert [r.doc_id for r in items] == [DOI, DOI, DOI, "b"]
    assert items[-1].latex == "x+1"
    assert items[-1].section == "Only"
    assert items[-1].context == "Before after."


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (
            '<article-id pub-id-type="pmid">1</article-id>'
            '<article-id pub-id-type="pmc">P</article-id>',
            "P",
        ),
        (
            '<article-id pub-id-type="publisher-id">x</article-id><article-id pub-id-type="pmid">7'
            "</article-id>",
            "7",
        ),
        ('<article-id pub-id-type="publisher-id">x</article-id>', "stem-name"),
        ("", "stem-name"),
    ],
)
def test_doc_id_preference(tmp_path: Path, ids: str, expected: str) -> None:
    path = _write(tmp_path, "stem-name.xml", ARTICLE.format(ids=ids))
    (record,) = _run(path)
    assert record.doc_id == expected
    assert record.eq_id == f"{expected}#0"


def test_formula_without_math_is_a_failure_and_keeps_positions(tmp_path: Path) -> None:
    xml = (
        '<article xmlns:xlink="http://www.w3.org/1999/xlink"><body><p>'
        '<disp-formula id="g"><graphic xlink:href="e.gif"/></disp-formula>'
        "<disp-formula><tex-math>$a$</tex-math></disp-formula></p></body></article>"
    )
    failure, record = _run(_write(tmp_path, "g.xml", xml))
    assert isinstance(failure, Failure)
    assert (failure.reason, failure.stage, failure.eq_id) == ("no-math", "extract", "g#0")
    assert isinstance(record, EquationRecord)
    assert (record.eq_id, record.latex) == ("g#1", "a")


def test_any_namespace_prefix(tmp_path: Path) -> None:
    xml = (
        '<j:article xmlns:j="http://jats.nlm.nih.gov" xmlns:m="http://www.w3.org/1998/Math/MathML">'
        "<j:body><j:sec><j:title>T</j:title><j:p>x <j:disp-formula><j:alternatives>"
        "<m:math><m:mi>y</m:mi></m:math><j:tex-math>y</j:tex-math></j:alternatives>"
        "</j:disp-formula> z</j:p></j:sec></j:body></j:article>"
    )
    (record,) = _run(_write(tmp_path, "ns.xml", xml))
    assert (
        record.mathml
        == '<m:math xmlns:m="http://www.w3.org/1998/Math/MathML"><m:mi>y</m:mi></m:math>'
    )
    assert (record.latex, record.section, record.context) == ("y", "T", "x z")


def test_named_entity_from_an_unloaded_dtd_becomes_its_character(tmp_path: Path) -> None:
    xml = (
        '<!DOCTYPE article PUBLIC "-//NLM//DTD JATS//EN" "JATS-archivearticle1.dtd">'
        '<article xmlns:mml="http://www.w3.org/1998/Math/MathML"><body><p>a&nbsp;b'
        "<disp-formula><mml:math><mml:mi>&alpha;</mml:mi></mml:math></disp-formula></p>"
        "</body></article>"
    )
    (record,) = _run(_write(tmp_path, "ent.xml", xml))
    assert "<mml:mi>\u03b1</mml:mi>" in record.mathml
    assert record.context == "a b"  # the no-break space is whitespace-normalised


@pytest.mark.parametrize(
    ("tex", "expected"),
    [
        (r"\documentclass{minimal}\begin{document}$$E=mc^2$$\end{document}", "E=mc^2"),
        (r"\documentclass{article}\begin{document} $x$ \end{document}", "x"),
        (r"\[ a+b \]", "a+b"),
        (r"\(a\)", "a"),
        ("$a$ and $b$", "$a$ and $b$"),
        (r"$\$5$", r"\$5"),
        (r"\alpha", r"\alpha"),
        ("  ", None),
        ("$$$$", None),
    ],
)
def test_clean_tex_math(tex: str, expected: str | None) -> None:
    assert clean_tex_math(tex) == expected


# --- hostile input ---------------------------------------------------------------------------

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<article><body><p><disp-formula><tex-math>&lol9;</tex-math></disp-formula>&lol9;</p></body>
</article>
"""


def test_billion_laughs_is_refused_without_expanding(tmp_path: Path) -> None:
    path = _write(tmp_path, "bomb.xml", BILLION_LAUGHS)
    started = time.monotonic()
    items = _run(path)
    assert time.monotonic() - started < 2.0
    failure = _single_failure(items, "entity-declaration")
    assert failure.doc_id == "bomb"
    assert "lollol" not in _dump(items)


def test_billion_laughs_in_utf16_is_refused(tmp_path: Path) -> None:
    data = BILLION_LAUGHS.replace('version="1.0"', 'version="1.0" encoding="UTF-16"')
    items = _run(_write(tmp_path, "bomb16.xml", data.encode("utf-16")))
    assert len(items) == 1
    assert isinstance(items[0], Failure)
    assert items[0].reason in {"entity-declaration", "invalid-utf8", "invalid-encoding"}


def _secret_file(tmp_path: Path) -> tuple[Path, str]:
    token = f"SECRET-{uuid.uuid4().hex}"
    secret = tmp_path / "secret.txt"
    secret.write_text(token)
    return secret, token


def _hostname() -> str:
    try:
        return Path("/etc/hostname").read_text().strip()
    except OSError:
        return ""


@pytest.mark.parametrize("target", ["secret", "/etc/hostname"])
def test_external_entity_is_refused_and_never_read(tmp_path: Path, target: str) -> None:
    secret, token = _secret_file(tmp_path)
    uri = secret.as_uri() if target == "secret" else "file:///etc/hostname"
    xml = (
        f'<?xml version="1.0"?>\n<!DOCTYPE article [<!ENTITY xxe SYSTEM "{uri}">]>\n'
        "<article><body><sec><title>&xxe;</title><p>&xxe;<disp-formula><tex-math>&xxe;"
        "</tex-math></disp-formula></p></sec></body></article>"
    )
    items = _run(_write(tmp_path, "xxe.xml", xml))
    _single_failure(items, "entity-declaration")
    dump = _dump(items)
    assert token not in dump
    hostname = _hostname()
    if hostname:
        assert hostname not in dump


def test_parameter_entity_is_refused(tmp_path: Path) -> None:
    secret, token = _secret_file(tmp_path)
    xml = (
        f'<!DOCTYPE article [<!ENTITY % ext SYSTEM "{secret.as_uri()}"> %ext;]>'
        "<article><p><disp-formula><tex-math>x</tex-math></disp-formula></p></article>"
    )
    items = _run(_write(tmp_path, "pe.xml", xml))
    _single_failure(items, "entity-declaration")
    assert token not in _dump(items)


def test_external_dtd_is_not_loaded(tmp_path: Path) -> None:
    secret, token = _secret_file(tmp_path)
    secret.write_text(f'<!ENTITY leak "{token}">')
    xml = (
        f'<!DOCTYPE article SYSTEM "{secret.as_uri()}">'
        "<article><p>&leak;<disp-formula><tex-math>x&leak;</tex-math></disp-formula></p>"
        "</article>"
    )
    items = _run(_write(tmp_path, "dtd.xml", xml))
    assert token not in _dump(items)
    (record,) = items
    assert isinstance(record, EquationRecord)
    assert record.latex == "x"


@pytest.mark.parametrize(
    "xml",
    [
        "<article><p><disp-formula><tex-math>x</tex-math></p></article>",
        "<article>",
        "",
        "not xml at all",
        "<a></b>",
    ],
)
def test_malformed_xml_is_a_failure(tmp_path: Path, xml: str) -> None:
    _single_failure(_run(_write(tmp_path, "bad.xml", xml)), "malformed-xml")


def test_invalid_utf8_is_a_failure(tmp_path: Path) -> None:
    data = b"<article><p>caf\xe9 <disp-formula><tex-math>x</tex-math></disp-formula></p></article>"
    failure = _single_failure(_run(_write(tmp_path, "latin.xml", data)), "invalid-utf8")
    assert "byte" in failure.detail


def test_declared_latin1_is_read(tmp_path: Path) -> None:
    data = (
        b'<?xml version="1.0" encoding="ISO-8859-1"?><article><p>caf\xe9 '
        b"<disp-formula><tex-math>x</tex-math></disp-formula></p></article>"
    )
    (record,) = _run(_write(tmp_path, "latin.xml", data))
    assert record.context == "caf\u00e9"


def test_size_limit_is_checked_before_parsing(tmp_path: Path) -> None:
    failure = _single_failure(_run(SAMPLE, max_document_bytes=1000), "too-large")
    assert "1000" in failure.detail
    # the check also holds for documents given as bytes
    (item,) = jats_records(
        SAMPLE.read_bytes(), "x", settings=IndexerSettings(max_document_bytes=10)
    )
    assert isinstance(item, Failure) and item.reason == "too-large"


def test_gzip_bomb_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "bomb.xml.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b"<article>" + b" " * 20_000_000 + b"</article>")
    assert path.stat().st_size < 100_000
    _single_failure(_run(path, max_document_bytes=1_000_000), "too-large")


def test_corrupt_gzip_and_missing_file_are_failures(tmp_path: Path) -> None:
    _single_failure(_run(_write(tmp_path, "c.xml.gz", b"\x1f\x8bnot gzip")), "unreadable-source")
    _single_failure(_run(tmp_path / "missing.xml"), "unreadable-source")


def test_deeply_nested_xml_is_a_failure_not_a_crash(tmp_path: Path) -> None:
    depth = 100_000
    xml = "<article>" + "<p>" * depth + "</p>" * depth + "</article>"
    _single_failure(_run(_write(tmp_path, "deep.xml", xml)), "malformed-xml")


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_random_bytes_never_raise(data: bytes) -> None:
    items = list(jats_records(data, "rnd"))
    assert all(isinstance(item, EquationRecord | Failure) for item in items)
