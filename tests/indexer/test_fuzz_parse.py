"""Bad input never raises out of extraction or featurisation: every equation a source yields is
a ParsedEquation or a Failure with a reason (hypothesis over :mod:`mathsearch.bench.fuzz_inputs`,
plus
explicit XML bombs, XXE, 10^5-deep nesting, 10 MB inputs and invalid UTF-8)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from mathsearch.bench.fuzz_documents import fuzz_inputs, generate
from mathsearch.bench.fuzz_inputs import Corpus, FuzzInput, latex_strings
from mathsearch.indexer.extract import extract
from mathsearch.indexer.parse import Featuriser, ParsedEquation
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings

FUZZ = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "fuzz"
CORPUS = Corpus.load()
FEATURISER = Featuriser(settings=IndexerSettings())
FUZZ_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def through(items: Sequence[EquationRecord | Failure]) -> list[ParsedEquation | Failure]:
    """Featurise the records of ``items``; failures pass through; every result checked."""
    records = [item for item in items if isinstance(item, EquationRecord)]
    results = [item for item in items if isinstance(item, Failure)]
    results += FEATURISER.parse_batch(records)
    for result in results:
        assert isinstance(result, ParsedEquation | Failure), result
        if isinstance(result, Failure):
            assert result.reason and result.stage, result
    return results


def extracted(item: FuzzInput, folder: Path, settings: IndexerSettings | None = None) -> list:
    path = folder / item.name
    path.write_bytes(item.data if isinstance(item.data, bytes) else item.data.encode())
    try:
        return list(extract([str(path)], item.fmt, settings or IndexerSettings()))
    finally:
        path.unlink()


@FUZZ_SETTINGS
@given(latex_strings(CORPUS))
def test_featuriser_never_raises_on_hostile_latex(latex: str) -> None:
    through([EquationRecord("q", "", 0, latex=latex)])  # a result per input, failures with reasons


@pytest.mark.parametrize("fmt", ["latex", "tex", "jats", "jsonl", "hepth"])
def test_every_format_survives_generated_inputs(fmt: str, tmp_path: Path) -> None:
    @FUZZ_SETTINGS
    @given(fuzz_inputs((fmt,), CORPUS))
    def check(item: FuzzInput) -> None:
        if item.fmt != "latex":
            items = extracted(item, tmp_path)
        elif item.field == "record":
            from mathsearch.workers.parsing import parse_records

            out = parse_records([{**json.loads(item.data), "eq_id": "r"}])
            assert len(out) == 1 and (not out[0].get("failure") or out[0]["reason"])
            return
        else:
            items = [EquationRecord("q", "", 0, **{item.field: item.data})]
        results = through(items)
        assert len(results) == len(items)

    check()


def test_generation_is_deterministic() -> None:
    first = [generate(CORPUS, 5, n) for n in range(25)]
    assert first == [generate(CORPUS, 5, n) for n in range(25)]
    assert {item.fmt for item in first} == {"latex", "tex", "jats", "jsonl", "hepth"}


def reasons(items: Sequence[EquationRecord | Failure]) -> list[str]:
    return [item.reason if isinstance(item, Failure) else "record" for item in items]


def test_billion_laughs_is_refused_unexpanded() -> None:
    items = list(extract([str(FUZZ / "billion-laughs.xml")], "jats"))
    assert reasons(items) == ["entity-declaration"]


def test_quadratic_blowup_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "quadratic.xml"
    big = "a" * 50_000
    path.write_text(f'<!DOCTYPE article [<!ENTITY a "{big}">]><article>{"&a;" * 50_000}</article>')
    assert reasons(list(extract([str(path)], "jats"))) == ["entity-declaration"]


def test_external_entity_is_never_read() -> None:
    items = list(extract([str(FUZZ / "xxe.xml")], "jats"))
    assert reasons(items) == ["entity-declaration"]
    assert "root:" not in json.dumps([item.to_dict() for item in items])


def test_external_dtd_is_not_fetched() -> None:
    items = list(extract([str(FUZZ / "external-dtd.xml")], "jats"))
    assert reasons(items) == ["record"]  # parsed without loading the DTD (no network)
    assert isinstance(through(items)[0], ParsedEquation)


def test_doctype_in_mathml_record_is_refused() -> None:
    laughs = (FUZZ / "billion-laughs.xml").read_text().split("<article>")[0]
    result = FEATURISER.parse_batch([EquationRecord("m", "", 0, mathml=laughs + "<math/>")])[0]
    assert isinstance(result, Failure) and result.reason == "forbidden-dtd"


@pytest.mark.parametrize(
    "latex",
    [
        "{" * 100_000 + "x" + "}" * 100_000,
        "\\frac{" * 100_000 + "1" + "}{2}" * 100_000,
        "\\left(" * 100_000 + "x" + "\\right)" * 100_000,
        "x^{" * 100_000 + "y" + "}" * 100_000,
    ],
    ids=["braces", "frac", "left-right", "scripts"],
)
def test_deep_latex_is_a_failure_not_a_recursion_error(latex: str) -> None:
    roomy = IndexerSettings(max_equation_chars=10_000_000)  # depth, not size, must stop it
    result = Featuriser(settings=roomy).parse_latex(latex)
    assert isinstance(result, Failure) and result.reason in {"too-deep", "too-many-nodes"}


def test_deep_mathml_is_a_failure() -> None:
    deep = "<math>" + "<mrow>" * 100_000 + "<mi>x</mi>" + "</mrow>" * 100_000 + "</math>"
    roomy = IndexerSettings(max_equation_chars=10_000_000)
    record = EquationRecord("m", "", 0, mathml=deep)
    result = Featuriser(settings=roomy).parse_batch([record])[0]
    assert isinstance(result, Failure) and result.reason in {"too-deep", "invalid-mathml"}


def test_deep_jats_and_tex_documents(tmp_path: Path) -> None:
    jats = tmp_path / "deep.xml"
    jats.write_text("<article>" + "<sec>" * 100_000 + "</sec>" * 100_000 + "</article>")
    assert reasons(list(extract([str(jats)], "jats"))) == ["malformed-xml"]
    tex = tmp_path / "deep.tex"
    tex.write_text("\\begin{document}\\[" + "{" * 100_000 + "x" + "}" * 100_000 + "\\]")
    assert reasons(list(extract([str(tex)], "tex"))) == ["too-large"]


def test_ten_megabyte_inputs_are_refused_early(tmp_path: Path) -> None:
    ten_mb = "x+" * 5_000_000
    result = FEATURISER.parse_latex(ten_mb)
    assert isinstance(result, Failure) and result.reason == "too-large"
    small = dataclasses.replace(IndexerSettings(), max_document_bytes=5_000_000)
    for name, fmt, body in (
        ("big.tex", "tex", f"\\begin{{document}}\\[{ten_mb}\\]"),
        ("big.xml", "jats", f"<article><p>{ten_mb}</p></article>"),
        ("big.jsonl", "jsonl", json.dumps({"latex": ten_mb})),
        ("big.txt", "hepth", f"\\begin{{equation}}{ten_mb}\\end{{equation}}->2003/0301001.tex\n"),
    ):
        (tmp_path / name).write_text(body)
        assert reasons(list(extract([str(tmp_path / name)], fmt, small))) == ["too-large"], name


def test_invalid_utf8_policy(tmp_path: Path) -> None:
    bad = b"\xff\xfe\xc3(\xed\xa0\x80"
    (tmp_path / "bad.jsonl").write_bytes(b'{"latex": "x' + bad + b'"}\n{"latex": "y"}\n')
    assert reasons(list(extract([str(tmp_path / "bad.jsonl")], "jsonl"))) == [
        "invalid-utf8",
        "record",
    ]
    (tmp_path / "bad.xml").write_bytes(b"<article><p>" + bad + b"</p></article>")
    assert reasons(list(extract([str(tmp_path / "bad.xml")], "jats"))) == ["invalid-utf8"]
    latin = list(extract([str(FUZZ / "latin1.tex")], "tex"))  # Latin-1 fallback: kept
    assert [item.latex for item in latin] == ["\\alpha = \xb2"]
    (tmp_path / "bad.txt").write_bytes(
        b"\\begin{equation} a" + bad + b" \\end{equation}->2003/0301001.tex\n"
    )
    assert reasons(list(extract([str(tmp_path / "bad.txt")], "hepth"))) == ["record"]
    surrogate = FEATURISER.parse_latex("x + \ud800")
    assert isinstance(surrogate, Failure) and surrogate.reason == "invalid-utf8"


def test_nul_control_and_bidi_characters() -> None:
    for latex in ("x\x00+y", "\x1b[31mx", "\u202ex+y\u202c", "a\u0301\u0308 + \u05d0"):
        result = FEATURISER.parse_latex(latex)
        assert isinstance(result, ParsedEquation), (latex, result)


def test_macro_bombs_stop_at_the_expansion_limit(tmp_path: Path) -> None:
    for bomb in ("\\def\\a{\\a\\a}\\a", "\\newcommand{\\x}{\\x x}\\x"):
        result = FEATURISER.parse_latex(bomb)
        assert isinstance(result, ParsedEquation), (bomb, result)  # expansion stopped, parsed
        tex = tmp_path / "bomb.tex"
        tex.write_text(f"{bomb.split('}', 1)[0]}}}\\begin{{document}}\\[{bomb}\\]\\end{{document}}")
        assert reasons(list(extract([str(tex)], "tex"))) == ["macro-expansion-limit"]
