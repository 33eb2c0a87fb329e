"""Figure extraction and featurisation on real TeX Live documents (resources/indexer/figures)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mathsearch.indexer.figure_features import (
    FigureVocabulary,
    featurise_figures,
    figure_text,
    load_image,
    stem,
    tokenize,
)
from mathsearch.indexer.figures import (
    FigureRecord,
    document_references,
    extract_figures,
    figures_of_text,
    make_fig_id,
    strip_latex,
)
from mathsearch.indexer.records import Failure

FIGURES = Path(__file__).resolve().parents[1] / "resources" / "indexer" / "figures"
HEPTH = FIGURES.with_name("figures-hepth")


@pytest.fixture(scope="module")
def records() -> list[FigureRecord | Failure]:
    return list(extract_figures([FIGURES]))


def by_doc(records: list[FigureRecord | Failure], doc_id: str) -> list[FigureRecord]:
    return [r for r in records if isinstance(r, FigureRecord) and r.doc_id == doc_id]


def test_psfrag_guide_figures(records: list[FigureRecord | Failure]) -> None:
    figs = by_doc(records, "psfrag/pfgguide.tex")
    assert [f.position for f in figs] == [0, 1, 2, 3]
    assert figs[0].fig_id == make_fig_id("psfrag/pfgguide.tex", 0) == "psfrag/pfgguide.tex#fig0"
    assert figs[0].label == "fig:argexam"
    assert figs[0].image is not None and figs[0].image.endswith("psfrag/testfig.eps")
    assert figs[0].caption.startswith("An illustration of various options")
    assert figs[2].label == "fig:example1" and figs[2].mentions
    assert "\\" not in " ".join(figs[2].mentions)
    assert "graphics" in figs[0].references  # \textsf{graphics}: the citation relation


def test_mentions_are_the_ref_sentences_with_neighbours(
    records: list[FigureRecord | Failure],
) -> None:
    (fig,) = by_doc(records, "mnras/mnras_template.tex")
    assert fig.label and fig.image is not None and fig.image.endswith("example.png")
    assert 1 <= len(fig.mentions) <= 3
    assert not any("\\ref" in m for m in fig.mentions)


def test_record_round_trip_and_item(records: list[FigureRecord | Failure]) -> None:
    fig = by_doc(records, "graphics/rotex.tex")[2]
    data = fig.to_dict()
    assert data["has_image"] is True
    assert FigureRecord.from_dict(data) == fig
    assert set(fig.to_item()) == {"caption", "mentions", "image"}


def test_malformed_input_becomes_failures(tmp_path: Path) -> None:
    text = r"\documentclass{article}\begin{document}\begin{figure}\caption{never closed}"
    out = figures_of_text(text, "broken")
    assert len(out) == 1 and isinstance(out[0], Failure) and out[0].reason == "unclosed-figure"
    missing = list(extract_figures([tmp_path / "nope.tex"]))
    assert isinstance(missing[0], Failure) and missing[0].reason == "missing"
    # a bad file inside a folder never stops the others
    shutil.copytree(FIGURES / "graphics", tmp_path / "graphics")
    (tmp_path / "bad.tex").write_bytes(b"\\documentclass{x}\\begin{figure*}\xff\xfe")
    found = list(extract_figures([tmp_path]))
    assert any(isinstance(r, Failure) for r in found)
    assert len([r for r in found if isinstance(r, FigureRecord)]) == 4


def test_strip_latex() -> None:
    assert strip_latex(r"A \emph{CCD} chip (Fig.~\ref{f:a}) of $x^2$ pixels.") == (
        "A CCD chip (Fig.) of pixels."
    )


def test_tokens_and_vocabulary_hash() -> None:
    assert stem("figures") == "figur" and "the" not in tokenize("The figures of the paper")
    vocab = FigureVocabulary.build(["plotting figures", "figures again"], limit=10)
    assert vocab.words[0] == "figur"
    ids = vocab.encode("figures unknownword")
    assert ids.tolist() == [2, 1]
    other = FigureVocabulary(vocab.words, image_size=32)
    assert other.content_hash != vocab.content_hash


def test_images_png_pdf_eps() -> None:
    png = load_image(FIGURES / "mnras" / "example.png", 32, 1)
    assert png is not None and png.shape == (1, 32, 32) and 0 <= png.min() < png.max() <= 1
    rgb = load_image(FIGURES / "mnras" / "example.png", 32, 3)
    assert rgb is not None and rgb.shape == (3, 32, 32)
    assert load_image(FIGURES / "missing.png", 32, 1) is None
    assert load_image(FIGURES / "README.md", 32, 1) is None
    if shutil.which("pdftoppm"):
        pdf = load_image(FIGURES / "apa7" / "samples" / "Figure1.pdf", 32, 1)
        assert pdf is not None and pdf.min() < 1.0
    if shutil.which("gs"):
        eps = load_image(FIGURES / "graphics" / "cat.eps", 32, 1)
        assert eps is not None and eps.min() < 1.0


def test_featurise_zero_image_and_flag(records: list[FigureRecord | Failure]) -> None:
    figs = [r for r in records if isinstance(r, FigureRecord)][:4]
    items = [f.to_item() for f in figs] + [{"caption": "", "mentions": [], "image": None}]
    vocab = FigureVocabulary.build([figure_text(i) for i in items], image_size=16)
    features = featurise_figures(
        items, vocab, images=[np.ones((1, 16, 16), "float32")] * 4 + [None]
    )
    assert features.tokens.shape == (5, 100) and features.lengths[-1] == 0
    assert features.has_image[:, 0].tolist() == [1, 1, 1, 1, 0]
    assert not features.images[-1].any()


def test_paper_bodies_are_documents_and_arxiv_ids_are_references() -> None:
    """The shared hep-th crawl keeps paper bodies without a preamble: a file that opens with
    ``\\begin{document}`` is a document, an ``\\input`` part is not; the bibliography's arXiv
    ids are what the paper cites."""
    found = [r for r in extract_figures([HEPTH]) if isinstance(r, FigureRecord)]
    assert sorted(r.doc_id for r in found) == ["0301088.tex", "0302097.tex"]
    citing = next(r for r in found if r.doc_id == "0302097.tex")
    assert "hep-th/0301088" in citing.references
    assert "as a function of the non-locality index" in citing.caption
    assert any("displays the ratio" in m for m in citing.mentions)
    assert document_references(r"see hep-th/9709229 and gr-qc/0301128, arXiv:2101.01234") == [
        "2101.01234",
        "gr-qc/0301128",
        "hep-th/9709229",
    ]
    assert document_references("www.example.org/1234567 and a/b/0301001") == []
