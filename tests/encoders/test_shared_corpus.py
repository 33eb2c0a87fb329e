"""mathsearch.encoders.shared_corpus: the held-out, document and overlap rules, on a small copy of
the real
data layout (the bundled hep-th sample, a real .tex paper, real hep_array records)."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import pytest

from mathsearch.encoders.corpus import CorpusError, EquationCorpus
from mathsearch.encoders.shared_corpus import hepth2003_splits, shared_training_corpus
from mathsearch.indexer.parse import Featuriser

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "indexer" / "resources" / "hepth2003-sample.txt"
PAPER = ROOT / "tests" / "resources" / "indexer" / "hep-th0301999.tex"
ARRAYS = ROOT / "tests" / "resources" / "indexer" / "hep_array-head.txt"


def _hepth(data: Path) -> EquationCorpus:
    files = [str(data / "hepth2003" / n) for n in ("equation.txt", "eqnarray.txt")]
    return EquationCorpus.from_sources(files, "hepth")


def _held_out(data: Path) -> list[str]:
    return hepth2003_splits(_hepth(data))[2].paper_ids


def _validation(data: Path) -> list[str]:
    return hepth2003_splits(_hepth(data))[1].paper_ids


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("shared") / "data"
    (root / "hepth2003").mkdir(parents=True)
    shutil.copy(SAMPLE, root / "hepth2003" / "equation.txt")
    (root / "hepth2003" / "eqnarray.txt").write_text("", encoding="utf-8")
    held = _held_out(root)
    docs = root / "hepth2003-documents"
    docs.mkdir()
    # the same real paper body as one training paper of the sample and as one held-out paper
    shutil.copy(PAPER, docs / "0301005.tex")
    shutil.copy(PAPER, docs / f"{held[0]}.tex")
    # real array records, plus copies of them filed under a sample paper and a held-out paper
    arrays = ARRAYS.read_text(encoding="utf-8")
    records = arrays.replace("HEP/2002/0209055", "HEP/2003/0301007")  # a covered paper
    records = records.replace("HEP/2002/0210103", f"HEP/2003/{held[1]}")  # a held-out one
    with lzma.open(root / "hep_array.txt.xz", "wt", encoding="utf-8") as out:
        out.write(records)
    return root


def test_held_out_papers_are_nowhere_and_documents_win(data: Path, tmp_path: Path) -> None:
    held, valid = set(_held_out(data)), set(_validation(data))
    assert valid and not held & valid
    with Featuriser() as featuriser:
        train, test, description = shared_training_corpus(data, featuriser, tmp_path)
    assert set(test.paper_ids) == held
    assert not (held | valid) & set(train.paper_ids)  # neither trains
    parts = description["parts"]
    # 0301005 comes from its document (sections known), not from the hepth2003 records
    assert parts["documents"]["papers"] == 1
    doc_sections = {t for t, p in zip(train.sections, train.papers, strict=True) if p == "0301005"}
    assert doc_sections - {""}
    hepth_ids = set(EquationCorpus.from_sources([str(data / "hepth2003" / "equation.txt")],
                                                "hepth").paper_ids)  # fmt: skip
    assert parts["hepth2003"]["papers"] == len(hepth_ids - held - valid - {"0301005"})
    # hep_array keeps only papers the 2003 sources do not cover (0204170 here)
    array_papers = {p for p in train.paper_ids if p not in hepth_ids}
    assert array_papers == {"0204170"}
    assert description["held_out"]["papers"] == len(held) == round(0.2 * len(hepth_ids))
    assert description["validation"]["papers"] == len(valid)


def test_cached_second_run_and_missing_source(data: Path, tmp_path: Path) -> None:
    with Featuriser() as featuriser:
        first = shared_training_corpus(data, featuriser, tmp_path)[0]
        cached = sorted(tmp_path.glob("corpus-*.npz"))
        assert len(cached) == 3
        again = shared_training_corpus(data, featuriser, tmp_path)[0]
        assert again.eq_ids == first.eq_ids
        with pytest.raises(CorpusError, match="does not exist"):
            shared_training_corpus(tmp_path / "nowhere", featuriser, tmp_path)
        with pytest.raises(CorpusError, match="unknown shared source"):
            shared_training_corpus(data, featuriser, tmp_path, sources=("arxiv",))


def test_sources_pick_the_parts_and_keep_the_held_out_rule(data: Path, tmp_path: Path) -> None:
    with Featuriser() as featuriser:
        every, _, _ = shared_training_corpus(data, featuriser, tmp_path)
        train, test, description = shared_training_corpus(
            data, featuriser, tmp_path, sources=("hepth2003", "documents")
        )
    assert set(description["parts"]) == {"hepth2003", "documents"}
    assert "0204170" in every.paper_ids and "0204170" not in train.paper_ids  # no arrays
    assert set(train.paper_ids) == set(every.paper_ids) - {"0204170"}
    assert set(test.paper_ids) == set(_held_out(data))  # the same held-out papers
    assert not set(_validation(data)) & set(train.paper_ids)
