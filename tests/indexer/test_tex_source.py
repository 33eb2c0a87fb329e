"""Equations of .tex files, folders and arXiv source archives (incl. hostile archives)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mathsearch.indexer.records import EquationRecord, Failure
from mathsearch.indexer.settings import IndexerSettings
from mathsearch.indexer.tex_source import doc_id_of, extract_document, iter_tex, plain_text

PAPER = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "hep-th0301999.tex"


def equations(items: list) -> list[EquationRecord]:
    return [item for item in items if isinstance(item, EquationRecord)]


@pytest.fixture(scope="module")
def paper() -> list[EquationRecord | Failure]:
    return list(iter_tex(PAPER, IndexerSettings(context_chars=80)))


def test_fixture_paper_equations_in_order(paper) -> None:
    assert all(isinstance(item, EquationRecord) for item in paper)
    assert [item.latex for item in paper] == [
        r"\Phi(x,y)=\sum_{k=-\infty}^\infty \phi_k(x)\, e^{iky/R}",
        r"S_{\rm free} = {\textstyle{1\over2}}\int d^Dx\,\left[(\partial\Phi)^2-m^2\Phi^2\right]",
        r"= \sum_k {\textstyle{1\over2}}\int d^{D-1}x\, "
        r"\left[|\partial\phi_k|^2-m_k^2|\phi_k|^2\right],",
        r"\langle \phi_k\phi_l \rangle = \delta_{k+l,0}\,G_k",
        r"G_k(p) = \frac{1}{p^2+m_k^2} \quad + \mathcal{O}(g^2),",
        r"\operatorname{Tr}\, {D\!\!\!/} = 0 , \qquad {\partial\!\!\!/} \varepsilon= "
        r"\left(a\,,\,b\right).",
        r"\sum_k \rho_k = 1",
        r"\int_0^\infty \rho(\mu)\, d\mu = 1 .",
    ]


def test_fixture_paper_ids_positions_and_environments(paper) -> None:
    assert {item.doc_id for item in paper} == {"hep-th0301999"}
    assert [item.position for item in paper] == list(range(8))
    assert [item.eq_id for item in paper][:2] == ["hep-th0301999#0", "hep-th0301999#1"]
    envs = [(item.extra["env"], item.extra["row"]) for item in paper]
    assert envs == [("equation", 0), ("eqnarray", 0), ("eqnarray", 1), ("eqnarray", 2),
                    ("align*", 0), ("align*", 1), ("$$", 0), ("\\[", 0)]  # fmt: skip
    assert all(item.source == str(PAPER) for item in paper)


def test_fixture_paper_sections_and_context(paper) -> None:
    assert [item.section for item in paper] == ["Introduction"] + ["The free action"] * 5 + [
        "Appendix: a sum rule"
    ] * 2
    first = paper[0].context
    assert "circle of radius R and expand" in first and "so that every mode has mass" in first
    assert "\\" not in first and "{" not in first and "$" not in first
    assert "ignored" not in first  # the % comment is not context
    assert all(len(item.context) <= 2 * 80 + 1 for item in paper)
    assert "The price is 5" in paper[-1].context


def test_context_window_is_bounded_by_settings() -> None:
    items = list(iter_tex(PAPER, IndexerSettings(context_chars=0)))
    assert all(item.context == "" for item in items)


def test_plain_text_strips_commands_lightly() -> None:
    assert plain_text(r"see \cite{x} and Eq.~\eqref{y}: \textbf{bold} $\alpha$ text") == (
        "see and Eq. : bold text"
    )


@pytest.mark.parametrize(
    "name, expected",
    [
        ("0301001.tex", "0301001"),
        ("hep-th0301001.tar.gz", "hep-th0301001"),
        ("2101.00001.tgz", "2101.00001"),
        ("0301001.gz", "0301001"),
        ("paper.tex.gz", "paper"),
    ],
)
def test_doc_id_strips_only_known_extensions(name: str, expected: str) -> None:
    assert doc_id_of(name) == expected


def _add(archive: tarfile.TarFile, name: str, data: bytes, kind: bytes = tarfile.REGTYPE) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind == tarfile.SYMTYPE:
        info.linkname = "/etc/passwd"
    else:
        info.size = len(data)
    archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


MAIN = rb"""\documentclass{article}
\newcommand{\beq}{\begin{equation}}\newcommand{\eeq}{\end{equation}}
\begin{document}
\section{Main}
\beq main = 1 \eeq
\input{sections/intro}
% \input{old}
\include{appendix}
\end{document}
"""


def _arxiv_tarball(path: Path) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        _add(archive, "ms.tex", MAIN)
        _add(
            archive,
            "sections/intro.tex",
            rb"\subsection{Intro} \beq intro = 2 \eeq \input{sections/more}",
        )
        _add(archive, "sections/more.tex", rb"\begin{align} more &= 4 \\ x &= y \end{align}")
        _add(archive, "appendix.tex", rb"\section{App} \[ app = 3 \]")
        _add(archive, "old.tex", rb"\[ old = 0 \]")
        _add(archive, "../evil.tex", rb"\[ evil = 666 \]")
        _add(archive, "/abs.tex", rb"\[ absolute = 666 \]")
        _add(archive, "link.tex", b"", tarfile.SYMTYPE)
        _add(archive, "fig.eps", b"%!PS-Adobe " + b"x" * 1000)
    return path


def test_archive_inlines_inputs_and_ignores_hostile_members(tmp_path: Path) -> None:
    items = list(iter_tex(_arxiv_tarball(tmp_path / "hep-th0301999.tar.gz")))
    assert all(isinstance(item, EquationRecord) for item in items)
    assert [item.latex for item in items] == [
        "main = 1",
        "intro = 2",
        "more = 4",
        "x = y",
        "app = 3",
    ]
    assert [item.section for item in items] == ["Main", "Intro", "Intro", "Intro", "App"]
    assert {item.doc_id for item in items} == {"hep-th0301999"}
    assert [item.eq_id for item in items] == [f"hep-th0301999#{i}" for i in range(5)]


def test_archive_without_main_concatenates_in_name_order(tmp_path: Path) -> None:
    path = tmp_path / "0302001.tgz"
    with tarfile.open(path, "w:gz") as archive:
        _add(archive, "b.tex", rb"\[ b = 2 \]")
        _add(archive, "a.tex", rb"\[ a = 1 \]")
    assert [item.latex for item in iter_tex(path)] == ["a = 1", "b = 2"]


def test_single_gzipped_tex_and_latin1(tmp_path: Path) -> None:
    path = tmp_path / "0303001.gz"
    path.write_bytes(
        gzip.compress("\\section{R\xe9sum\xe9}\n\\[ \\acute{e} = 1 \\]".encode("latin-1"))
    )
    [item] = iter_tex(path)
    assert (item.doc_id, item.section, item.latex) == ("0303001", "R\xe9sum\xe9", r"\acute{e} = 1")


@pytest.mark.parametrize("payload", [b"not an archive at all", b"\x1f\x8b\x08\x00garbage"])
def test_bad_archives_become_one_failure(tmp_path: Path, payload: bytes) -> None:
    path = tmp_path / "broken.tar.gz"
    path.write_bytes(payload)
    [failure] = iter_tex(path)
    assert isinstance(failure, Failure)
    assert (failure.stage, failure.reason, failure.doc_id) == ("extract", "bad-archive", "broken")
    assert failure.eq_id == "broken#*"


def test_archive_and_file_size_limits(tmp_path: Path) -> None:
    tight = IndexerSettings(max_document_bytes=200)
    [failure] = iter_tex(_arxiv_tarball(tmp_path / "big.tar.gz"), tight)
    assert isinstance(failure, Failure) and failure.reason == "too-large"
    [failure] = iter_tex(PAPER, tight)
    assert isinstance(failure, Failure) and failure.reason == "too-large"
    [failure] = iter_tex(tmp_path / "missing.tex")
    assert isinstance(failure, Failure) and failure.reason == "unreadable-source"


def test_folder_documents_and_inputs(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "main.tex").write_text(
        "\\documentclass{article}\\begin{document}\\[ b = 1 \\]\\input{part}\\end{document}"
    )
    (tmp_path / "b" / "part.tex").write_text("\\[ part = 2 \\]")
    (tmp_path / "a.tex").write_text("\\[ a = 0 \\]")
    items = list(iter_tex(tmp_path))
    assert [(item.doc_id, item.latex) for item in items] == [
        ("a", "a = 0"), ("b/main", "b = 1"), ("b/main", "part = 2")
    ]  # fmt: skip


def test_equation_failures_take_positions_and_do_not_stop_the_document() -> None:
    text = (
        r"\def\loop{\loop\loop}\begin{document}"
        r"\[ first \] \[ \loop \] \[ " + "x" * 300 + r" \] \[ last \]\end{document}"
    )
    items = list(extract_document(text, "d", settings=IndexerSettings(max_equation_chars=200)))
    kinds = [(type(item).__name__, getattr(item, "reason", "")) for item in items]
    assert kinds == [
        ("EquationRecord", ""),
        ("Failure", "macro-expansion-limit"),
        ("Failure", "too-large"),
        ("EquationRecord", ""),
    ]
    assert [item.eq_id for item in items] == ["d#0", "d#1", "d#2", "d#3"]
    assert all(item.stage == "extract" for item in items if isinstance(item, Failure))


def test_preamble_displays_and_runaway_shorthands() -> None:
    text = (
        r"\newcommand{\be}{\be\begin{equation}}\newcommand{\ee}{\end{equation}}"
        r"\[ preamble \]\begin{document}\be x \ee \begin{equation} kept \end{equation}"
        r"\end{document}"
    )
    items = list(extract_document(text, "d", settings=IndexerSettings(max_macro_expansions=50)))
    assert isinstance(items[0], Failure) and items[0].reason == "macro-expansion-limit"
    assert [item.latex for item in equations(items)] == ["kept"]


_PIECES = st.sampled_from(
    [
        "\\begin{document}", "\\end{document}", "\\section{", "}", "{", "\\be", "\\ee", "$$", "$",
        "\\newcommand{\\be}{\\begin{equation}}", "\\def\\ee{\\end{equation}}", "\\def\\x{\\x\\x}",
        "\\x", "\\input{a}", "\\\\", "&", "%", "\n\n", "x = 1", "\\begin{align}", "\\end{align}",
        "\\[", "\\]", "#1", "\\let\\y\\be", "\\y",
    ]
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_random_documents_never_raise(text: str) -> None:
    limits = IndexerSettings(max_macro_expansions=50, context_chars=30)
    items = list(extract_document(text, "rand", settings=limits))
    assert all(isinstance(item, EquationRecord | Failure) for item in items)
    positions = [item.eq_id for item in items if item.eq_id != "rand#*"]
    assert positions == [f"rand#{i}" for i in range(len(positions))]


def test_iffalse_blocks_are_not_extracted() -> None:
    text = (
        r"\begin{document}\iffalse \[ a \iff b \] \ifx\a\b \[ nested \] \fi \[ still \] \fi"
        r"\[ shown \] \iffalse \[ unclosed \]"
    )
    assert [item.latex for item in extract_document(text, "d")] == ["shown"]


def test_binary_files_become_a_binary_source_failure(tmp_path: Path) -> None:
    """A binary ``.tex`` was read as Latin-1 and gave no equation and no failure record."""
    junk = bytes(range(256)) * 8
    single = tmp_path / "blob.tex"
    single.write_bytes(junk)
    [failure] = iter_tex(single)
    assert isinstance(failure, Failure)
    assert (failure.stage, failure.reason, failure.eq_id) == ("extract", "binary-source", "blob#*")
    assert "binary data" in failure.detail
    gzipped = tmp_path / "0303002.gz"
    gzipped.write_bytes(gzip.compress(b"\x7fELF\x02\x01\x01\x00" + junk))
    [failure] = iter_tex(gzipped)
    assert isinstance(failure, Failure) and failure.reason == "binary-source"
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "ok.tex").write_text(r"\[ a = 1 \]")
    (folder / "photo.tex").write_bytes(junk)
    items = list(iter_tex(folder))
    assert [(item.doc_id, type(item).__name__) for item in items] == [
        ("ok", "EquationRecord"), ("photo", "Failure")
    ]  # fmt: skip
    assert items[1].reason == "binary-source"
    # control characters LaTeX files do hold (form feed, ^Z, tabs) are not binary
    text = tmp_path / "old.tex"
    text.write_bytes(b"\x0c\t\\[ b = 2 \\]\r\n\x1a")
    assert [item.latex for item in iter_tex(text)] == ["b = 2"]


def test_unterminated_environments_become_failures_in_their_place() -> None:
    """``\\begin{equation}`` without its ``\\end`` (or ``\\[`` without ``\\]``) disappeared."""
    text = (
        r"\begin{document}\begin{equation} a = 1 \end{equation}"
        "\n\\begin{equation} b = 2\n\\begin{align} c = 3 \\end{align}"
        "\n\\[ d = 4\n\n\\[ e = 5 \\]\n\\begin{gather*} f = 6\n\\end{document}"
    )
    items = list(extract_document(text, "d"))
    kinds = [
        (type(item).__name__, item.reason if isinstance(item, Failure) else item.latex)
        for item in items
    ]
    assert kinds == [
        ("EquationRecord", "a = 1"),
        ("Failure", "unterminated-environment"),
        ("EquationRecord", "c = 3"),
        ("Failure", "unterminated-environment"),
        ("EquationRecord", "e = 5"),
        ("Failure", "unterminated-environment"),
    ]
    assert [item.eq_id for item in items] == [f"d#{n}" for n in range(6)]
    details = [item.detail for item in items if isinstance(item, Failure)]
    assert details[0].startswith(r"\begin{equation} without its \end{equation}")
    assert details[1].startswith(r"\[ without its \]")
    assert details[2].startswith(r"\begin{gather*} without its \end{gather*}")
    assert "b = 2" in items[1].excerpt
