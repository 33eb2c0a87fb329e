"""Equation bitmaps (ecml2019 seed, sec. 3): canvas, crop, layout, rewriting, failures as data."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mathsearch.indexer.bitmap import (
    BitmapSettings,
    RenderError,
    centre_crop,
    render_batch,
    render_bitmap,
    to_mathtext,
)
from mathsearch.indexer.errors import IndexerError
from mathsearch.indexer.records import Failure
from mathsearch.indexer.settings import IndexerSettings, SettingsError

# Verbatim equation bodies of ../shared/data/hepth2003/equation.txt (papers 0301004, 0301012).
REAL = [
    r"""\rho_N^D = \left(\prod_{i=1}^N\int d\Omega_{p_i}\right)(2\pi)^D\delta^D
 (p-\sum_{i=1}^N p_i)""",
    r"""\Phi({\bf{x}},y)=\sum_{k=-\infty}^\infty \phi_k({\bf{x}})
 \exp(iky/R)/\sqrt{2\pi R}; \quad \phi_k^*({\bf{x}}) = \phi_{-k}({\bf{x}}).""",
    r"""S_{\rm free}= \frac{1}{2}\int\!\! d^D\!x[(\partial_x\Phi)^2 - m^2\Phi^2]
 =\sum_k \frac{1}{2}\int\!\!d^{D-1}\!{\bf x}[(\partial_{\bf x}\phi_k^*)
 (\partial_{\bf x}\phi_k) - m_k^2\phi_k^*\phi_k],""",
    r"""\rho^{2\ell}_{m_0\rightarrow m_1+m_2}=\frac{\pi^{1-\ell}\Gamma(\ell-1)
 (\lambda(m_0^2,m_1^2,m_2^2))^{2\ell-3}}
  {2^{2\ell-1}m_0^{2\ell-2}\Gamma(2\ell-2)},""",
    r"""\Delta S = {g^2 \over 2 \pi^2} \int {d^4 p \over (2 \pi)^4} \; {\tilde p}^\mu""",
    r"""\gamma^i = \left( \begin{array}{cc} 0&\sigma_i\\ -\sigma_i&0 \end{array}\right)\,,
 \label{gammai}""",
]


def ink(bitmap: np.ndarray) -> np.ndarray:
    return bitmap < 128


def test_shape_dtype_and_paper_convention() -> None:
    bitmap = render_bitmap(r"E = mc^2")
    assert bitmap.shape == (106, 531)
    assert bitmap.dtype == np.uint8
    assert bitmap[0, 0] == bitmap[-1, -1] == 255  # white paper
    assert bitmap.min() < 40  # black ink
    assert 30 < ink(bitmap).sum() < 2000


def test_equation_is_centred_and_single_line_fits_the_crop() -> None:
    bitmap = render_bitmap(r"\alpha + \beta = \gamma_{\mu\nu}")
    rows, cols = np.nonzero(ink(bitmap))
    assert abs((rows.min() + rows.max()) / 2 - 106 / 2) <= 2
    assert abs((cols.min() + cols.max()) / 2 - 531 / 2) <= 2
    # The seed: "this decrease in height does not affect single-line equations".
    assert ink(centre_crop(bitmap)).sum() == ink(bitmap).sum()


def test_centre_crop_is_the_seed_rectangle() -> None:
    bitmap = render_bitmap(REAL[1])
    crop = centre_crop(bitmap)
    assert crop.shape == (32, 333)
    assert crop.dtype == np.uint8
    np.testing.assert_array_equal(crop, bitmap[37:69, 99:432])
    crop[:] = 0
    assert bitmap.min() < 255 and bitmap.max() == 255  # a copy, not a view
    with pytest.raises(RenderError):
        centre_crop(np.zeros((10, 10), dtype=np.uint8))


def test_deterministic_and_distinct() -> None:
    first, again = render_bitmap(REAL[0]), render_bitmap(REAL[0])
    np.testing.assert_array_equal(first, again)
    other = render_bitmap(REAL[3])
    assert not np.array_equal(first, other)
    assert not np.array_equal(render_bitmap("a+b"), render_bitmap("a-b"))


def test_wide_equation_is_scaled_down_to_fit() -> None:
    short = render_bitmap(r"x_{1} + x_{2}")
    wide = render_bitmap(" + ".join(f"x_{{{i}}}" for i in range(60)))
    cols = np.nonzero(ink(wide).any(axis=0))[0]
    assert cols.min() <= 3 and cols.max() >= 527  # spans the canvas, centred
    short_height = np.ptp(np.nonzero(ink(short).any(axis=1))[0])
    wide_height = np.ptp(np.nonzero(ink(wide).any(axis=1))[0])
    assert wide_height < short_height  # glyphs shrank, aspect kept
    # The crop misses beginning and end of long equations (seed, sec. 3).
    assert ink(centre_crop(wide)).sum() < ink(wide).sum()


def test_tall_multi_row_equation_fits_the_canvas() -> None:
    rows = r" \\ ".join(f"a_{{{i}}} = b_{{{i}}}" for i in range(12))
    bitmap = render_bitmap(rows)
    assert bitmap.shape == (106, 531)
    assert ink(bitmap).any(axis=1).sum() > 60


def test_rewrites_for_mathtext() -> None:
    assert to_mathtext(r"{a \over b} + c") == [r"{\frac{a }{ b}} + c"]
    assert to_mathtext(r"\frac12 + \sqrt2 + \hat\alpha") == [
        r"\frac{1}{2} + \sqrt{2} + \hat{\alpha}"
    ]
    assert to_mathtext(r"x = 1 \label{eq:one} \nonumber") == ["x = 1"]
    assert to_mathtext(r"\mbox{for $x>0$} y") == [r"{\text{for }{x>0} } y"]
    assert to_mathtext(r"\bigl( x \bigr) \ge 0") == [r"( x ) \geq 0"]
    assert to_mathtext(r"a &=& b \\ c &=& d") == ["a = b", "c = d"]
    (matrix,) = to_mathtext(r"\left(\begin{array}{cc} a & b \\ c & d \end{array}\right)")
    assert r"\substack{" in matrix and r"\quad" in matrix and r"\begin" not in matrix
    assert to_mathtext(r"\left( a \\ b \right)") == [r"\left( a\right.", r"\left.b \right)"]


@pytest.mark.parametrize("latex", REAL)
def test_real_equations_render(latex: str) -> None:
    bitmap = render_bitmap(latex)
    assert ink(bitmap).sum() > 100


def test_unknown_macro_fails_unless_drawn_as_text() -> None:
    with pytest.raises(RenderError) as caught:
        render_bitmap(r"\half \Tr F^2")
    assert caught.value.reason == "unknown-macro"
    assert isinstance(caught.value, IndexerError)
    drawn = render_bitmap(r"\half \Tr F^2", BitmapSettings(unknown_commands="text"))
    assert ink(drawn).sum() > 30


@pytest.mark.parametrize(
    ("latex", "reason"),
    [
        ("", "empty"),
        ("   % only a comment", "empty"),
        (r"\quad", "blank"),
        (r"\frac{1}{", "syntax"),
    ],
)
def test_failure_reasons(latex: str, reason: str) -> None:
    with pytest.raises(RenderError) as caught:
        render_bitmap(latex)
    assert caught.value.reason == reason


def test_too_large_and_settings() -> None:
    with pytest.raises(RenderError) as caught:
        render_bitmap("x" * 50, BitmapSettings.from_indexer(IndexerSettings(max_equation_chars=10)))
    assert caught.value.reason == "too-large"
    with pytest.raises(SettingsError):
        BitmapSettings(unknown_commands="guess")


def test_batch_turns_failures_into_records() -> None:
    latexes = [REAL[0], r"\unknownmacro{x}", "", r"\frac{1}{", None]
    results = render_batch(latexes, eq_ids=["a", "b", "c", "d", "e"], doc_id="doc")  # type: ignore[list-item]
    assert isinstance(results[0], np.ndarray) and results[0].shape == (106, 531)
    failures = results[1:]
    assert all(isinstance(f, Failure) for f in failures)
    assert [f.reason for f in failures] == ["unknown-macro", "empty", "syntax", "empty"]  # type: ignore[union-attr]
    assert {f.stage for f in failures} == {"render"}  # type: ignore[union-attr]
    assert [f.eq_id for f in failures] == ["b", "c", "d", "e"]  # type: ignore[union-attr]
    assert failures[0].doc_id == "doc" and failures[0].excerpt  # type: ignore[union-attr]


def test_threads_render_the_same_bitmap() -> None:
    expected = render_bitmap(REAL[2])
    results: list[np.ndarray] = []

    def work() -> None:
        results.append(render_bitmap(REAL[2]))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4
    for result in results:
        np.testing.assert_array_equal(result, expected)


def _check_batch(latex: str) -> None:
    (result,) = render_batch([latex])
    if isinstance(result, Failure):
        assert result.stage == "render" and result.reason
    else:
        assert result.shape == (106, 531) and result.dtype == np.uint8


LATEX_PIECES = st.sampled_from(
    [
        "{",
        "}",
        "\\",
        "^",
        "_",
        "&",
        r"\\",
        r"\frac",
        r"\left(",
        r"\right)",
        "$",
        "%",
        r"\over",
        r"\begin{array}{c}",
        r"\end{array}",
        " ",
        "x",
        "1",
        r"\alpha",
        r"\mbox{",
        "#",
    ]
)


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_batch_never_raises_on_random_text(text: str) -> None:
    _check_batch(text)


@hsettings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL), st.lists(st.tuples(st.integers(0, 400), LATEX_PIECES), max_size=4))
def test_batch_never_raises_on_mutated_real_equations(
    latex: str, edits: list[tuple[int, str]]
) -> None:
    for offset, piece in edits:
        position = offset % (len(latex) + 1)
        latex = latex[:position] + piece + latex[position + 1 :]
    _check_batch(latex)
