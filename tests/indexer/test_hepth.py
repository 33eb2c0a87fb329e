"""The hep-th record format: grouping, fragments, row splitting, arrays, ids, robustness."""

from __future__ import annotations

import itertools
import lzma
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.extract import UnknownFormat, extract, guess_format
from mathsearch.indexer.hepth import (
    bundled_sample_lines,
    iter_hepth,
    open_lines,
    read_records,
)
from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

# Verbatim records of ../shared/data/hepth2003/eqnarray.txt and hep_array.txt.xz.
EQNARRAY_NN = r"""\begin{eqnarray}
&& \partial_+\partial_- Z + 2im\partial_{\tau}Z=0 ~, \nn
&& \partial_+\partial_- X^I + m^2 X^I = 0 ~, ~~~(I=3,\ldots, 8)\nn
&& \left(\partial_+  -\frac{m}{2} \gamma^1\bar{\gamma}^2\right)S
-m\Pi\tilde{S}=0~,\nn
&& \left(\partial_-  -\frac{m}{2}
\gamma^1\bar{\gamma}^2\right)\tilde{S}+m\Pi S=0~.
\label{eom}
\end{eqnarray}->2003/0301035.tex
"""
EQNARRAY_CONTINUED = r"""\begin{eqnarray}
 \rho^4_{m_0\rightarrow m_1+m_2+m_3}\!\!\!&=&\!\frac{1}{32\pi^3 m_0}
 \int_0\!\int_0 d\mu_1 d\mu_2\,
 (m_0\!-\!m_{1\mu_1}\!-\!m_{2\mu_2}\!-\!m_{3(\mu_1+\mu_2)}) \nonumber\\
 & & + {\rm 2~other~perms}.
\end{eqnarray}->2003/0301004.tex
"""
ARRAYS = r"""\begin{array}{cc}
I_2 &-\frac{\sigma_ip_i}{E+m}\\
\frac{\sigma_ip_i}{E+m}& I_2 \end{array}->HEP/2002/0210103.tex
\begin{array}}
\def\ea{\end{array}->HEP/1995/9501001.tex
\begin{array}{#1}#2\end{array}->HEP/1995/9501001.tex
"""


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def real_lines(name: str, limit: int) -> list[str]:
    """The first ``limit`` lines of a shared data file, else the bundled (real) sample."""
    path = DATA / name
    if not path.exists():
        return bundled_sample_lines()
    return list(itertools.islice(open_lines(path), limit))


def test_records_span_lines_and_count_positions_per_paper() -> None:
    records = list(read_records(bundled_sample_lines()))
    assert len(records) == 224
    assert records[0].doc_id == "0301001" and records[0].position == 0
    assert records[0].paper == "2003/0301001.tex"
    multi = [r for r in records if r.doc_id == "0301004"]
    assert [r.position for r in multi] == list(range(len(multi)))
    assert multi[0].raw.count("\n") >= 2
    assert multi[0].eq_id == "0301004#0"


def test_bundled_sample_equations_and_fragments() -> None:
    items = list(iter_hepth(bundled_sample_lines()))
    kinds = Counter(getattr(item, "reason", "equation") for item in items)
    assert kinds == {"equation": 206, "macro-fragment": 18}
    first = items[0]  # "\begin{equation}}\n\newcommand{\eeq}{\end{equation}"
    assert isinstance(first, Failure) and (first.stage, first.eq_id) == ("extract", "0301001#0")
    assert first.excerpt.startswith("\\begin{equation}}")
    assert len({item.eq_id for item in items}) == len(items)
    for item in items:
        if isinstance(item, EquationRecord):
            assert "\\newcommand" not in item.latex and "#1" not in item.latex
            assert "\\label" not in item.latex and "\\begin{equation}" not in item.latex
            assert item.extra["paper"].endswith(f"{item.doc_id}.tex")


def test_eqnarray_rows_split_with_nn_and_continuations_merge() -> None:
    items = list(iter_hepth(lines(EQNARRAY_NN + EQNARRAY_CONTINUED)))
    latex = [item.latex for item in items]
    assert latex[:4] == [
        r"\partial_+\partial_- Z + 2im\partial_{\tau}Z=0 ~,",
        r"\partial_+\partial_- X^I + m^2 X^I = 0 ~, ~~~(I=3,\ldots, 8)",
        r"\left(\partial_+ -\frac{m}{2} \gamma^1\bar{\gamma}^2\right)S -m\Pi\tilde{S}=0~,",
        r"\left(\partial_- -\frac{m}{2} \gamma^1\bar{\gamma}^2\right)\tilde{S}+m\Pi S=0~.",
    ]
    assert [item.eq_id for item in items[:4]] == [f"0301035#{i}" for i in range(4)]
    assert [item.extra["row"] for item in items[:4]] == [0, 1, 2, 3]
    assert len(items) == 5 and latex[4].endswith(r"+ {\rm 2~other~perms}.")
    assert items[4].eq_id == "0301004#0"


def test_array_records_are_one_matrix_each_and_fragments_rejected() -> None:
    items = list(iter_hepth(lines(ARRAYS)))
    matrix = items[0]
    assert isinstance(matrix, EquationRecord) and matrix.doc_id == "0210103"
    assert matrix.latex.startswith(r"\begin{array}{cc} I_2 &-\frac")
    assert matrix.latex.endswith(r"I_2 \end{array}") and matrix.latex.count("\\\\") == 1
    assert [(item.reason, item.eq_id) for item in items[1:]] == [
        ("macro-fragment", "9501001#0"),
        ("macro-fragment", "9501001#1"),
    ]


def test_positions_continue_across_files_when_shared(tmp_path: Path) -> None:
    (tmp_path / "equation.txt").write_text(
        "\\begin{equation} a \\end{equation}->2003/0301035.tex\n"
    )
    compressed = tmp_path / "eqnarray.txt.xz"
    with lzma.open(compressed, "wt", encoding="utf-8") as handle:
        handle.write(EQNARRAY_NN)
    positions: dict[str, int] = {}
    first = list(iter_hepth(tmp_path / "equation.txt", positions=positions))
    second = list(iter_hepth(compressed, positions=positions))
    ids = [item.eq_id for item in first + second]
    assert ids == [f"0301035#{i}" for i in range(5)]
    assert second[0].source == str(compressed)
    alone = list(iter_hepth(compressed))
    assert alone[0].eq_id == "0301035#0"


def test_invalid_utf8_lines_fall_back_to_latin1(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes(
        b"\\begin{equation} \\mbox{r\xe9sum\xe9} = 1 \\end{equation}->2003/0301999.tex\n"
    )
    [item] = iter_hepth(path)
    assert item.latex == "\\mbox{r\xe9sum\xe9} = 1"


def test_commented_out_and_too_large_records() -> None:
    text = (
        "\\begin{equation}\n% a = b\n%\\end{equation}->2003/0301001.tex\n"
        "\\begin{equation} " + "x" * 500 + " \\end{equation}->2003/0301001.tex\n"
    )
    items = list(iter_hepth(lines(text), IndexerSettings(max_equation_chars=200)))
    assert [(item.reason, item.eq_id) for item in items] == [
        ("commented-out", "0301001#0"),
        ("too-large", "0301001#1"),
    ]


def test_real_records_from_the_shared_data() -> None:
    for name, limit in (("hepth2003/equation.txt", 3000), ("hepth2003/eqnarray.txt", 3000)):
        items = list(iter_hepth(real_lines(name, limit)))
        equations = [item for item in items if isinstance(item, EquationRecord)]
        failures = [item for item in items if isinstance(item, Failure)]
        assert len(equations) > 10 * len(failures) > 0
        assert {item.stage for item in failures} == {"extract"}
        assert all(item.latex and "\\label" not in item.latex for item in equations)
        assert all("\\newcommand" not in item.latex for item in equations)
        assert len({item.eq_id for item in items}) == len(items)


def _real_records() -> list[str]:
    records = list(read_records(real_lines("hepth2003/equation.txt", 4000)))
    records += list(read_records(real_lines("hepth2003/eqnarray.txt", 2000)))
    return [record.raw for record in records[::5]][:400]


REAL = _real_records()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.sampled_from(REAL),
    cut=st.tuples(st.integers(0, 400), st.integers(0, 400)),
    insert=st.sampled_from(["", "}", "{", "\\\\", "&", "%", "#1", "\\begin{eqnarray}", "$$", "\\"]),
    marker=st.sampled_from(["->2003/0301001.tex", "->HEP/1999/9901001.tex", "", "->"]),
)
def test_mutated_real_records_never_raise(raw: str, cut: tuple, insert: str, marker: str) -> None:
    start, stop = sorted(cut)
    mutated = raw[:start] + insert + raw[stop:]
    text = f"{mutated}{marker}\n{raw}->2003/0301002.tex\n"
    for item in iter_hepth(lines(text), IndexerSettings(max_macro_expansions=200)):
        assert isinstance(item, EquationRecord | Failure)
        if isinstance(item, EquationRecord):
            assert item.latex.strip() == item.latex and item.latex


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="\\{}[]&%$#1 \nab->/.0123", max_size=200))
def test_random_text_never_raises(text: str) -> None:
    items = list(iter_hepth(lines(text + "->2003/0301001.tex\n")))
    assert all(isinstance(item, EquationRecord | Failure) for item in items)


def test_hep_array_head() -> None:
    if (DATA / "hep_array.txt.xz").exists():
        head = real_lines("hep_array.txt.xz", 2000)
    else:  # the first 60 records of ../shared/data/hep_array.txt.xz, verbatim
        fixture = (
            Path(__file__).resolve().parents[1] / "resources" / "indexer" / "hep_array-head.txt"
        )
        head = fixture.read_text("utf-8").splitlines(keepends=True)
    items = list(iter_hepth(head))
    equations = [item for item in items if isinstance(item, EquationRecord)]
    assert len(equations) > 0.9 * len(items)
    assert all(item.latex.startswith("\\begin{array}") for item in equations)


def test_unreadable_files_become_a_failure(tmp_path: Path) -> None:
    broken = tmp_path / "hep_array.txt.xz"
    broken.write_bytes(b"\xfd7zXZ\x00 truncated")
    for path in (broken, tmp_path / "missing.txt"):
        [failure] = iter_hepth(path)
        assert isinstance(failure, Failure) and failure.reason == "unreadable-source"


def test_array_records_cut_at_a_nested_end_are_truncated_not_equations() -> None:
    # verbatim record of hep_array.txt.xz: the corpus regex stopped at the inner \end{array}
    raw = (
        r"\begin{array}{l} \tau_{j4}^{\lambda_j}=\left\{ \begin{array}{rl} \tau_{j4},"
        r"{\rm ~for~}\lambda_j=+\\ \tau_{4j},{\rm ~for~}\lambda_j=- \end{array}"
    )
    [item] = iter_hepth(lines(f"{raw}->HEP/2003/0301001.tex\n"))
    assert isinstance(item, Failure)
    assert (item.stage, item.reason) == ("extract", "truncated-environment")
    whole = raw + r" \end{array}"
    [kept] = iter_hepth(lines(f"{whole}->HEP/2003/0301001.tex\n"))
    assert isinstance(kept, EquationRecord)


def test_the_format_guess_reads_a_txt_as_hepth_only_with_source_markers(tmp_path: Path) -> None:
    """``notes.txt`` was read as hep-th and gave one ``no-source-marker`` record."""
    records = tmp_path / "equation.txt"
    records.write_text("\\begin{equation}\n x = 1\n\\end{equation}->2003/0301001.tex\n")
    packed = tmp_path / "eq.txt.xz"
    packed.write_bytes(lzma.compress(records.read_bytes()))
    notes = tmp_path / "notes.txt"
    notes.write_text("shopping list\n- milk\n- eggs\n")
    assert guess_format(str(records)) == guess_format(str(packed)) == "hepth"
    with pytest.raises(UnknownFormat, match=r"notes.txt is not a hep-th record file.*--format"):
        guess_format(str(notes))
    with pytest.raises(UnknownFormat, match="--format"):
        list(extract([str(notes)]))
    # what cannot be looked at is left to the reader, which records why
    assert guess_format(str(tmp_path / "missing.txt")) == "hepth"
    # an explicit --format is obeyed: the lines become a failure record, never silence
    [failure] = extract([str(notes)], "hepth")
    assert isinstance(failure, Failure) and failure.reason == "no-source-marker"
