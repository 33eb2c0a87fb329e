"""Every repository path that README.md, RELIABILITY.md, docs/*.md and research/README.md name
exists.

A path counts when it starts at a top-level folder of the repository (``tests/...``,
``docs/...``, ``opensearch/...``) and is not the tail of a longer path (``../shared/data/...``,
``runs/gcn/...``, a URL); relative Markdown links are checked from their file, and a path found
from the file's own folder counts too (docs/*.md name their records ``research/2026-...md``, in
docs/research/, beside the top-level research/ of prototypes). Not checked: the research record
(docs/research/, a history that names files as they were), the files a "where a new thing goes"
section invents, and placeholders (``gcn-vN.onnx``, ``<mode>.py``).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "RELIABILITY.md", *sorted((REPO / "docs").glob("*.md"))]
DOCS += [REPO / "research" / "README.md"]
TOP = ("tests", "docs", "mathsearch", "indexer", "encoders", "export", "opensearch", "workers")
TOP += ("deploy", "research", "notes")
#: The old top-level bench/ (moved to research/): listed so that a doc still naming it fails.
TOP += ("bench",)
#: The superseded models, out of the wheel (models/README.md).
TOP += ("models",)

#: A path from the repository root: a top-level folder not preceded by a path or word character.
PATH = re.compile(rf"(?<![\w./~$@-])((?:{'|'.join(TOP)})/[\w./*<>-]*[\w*/>])")
#: A Markdown link target: ``[text](target)``.
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: Placeholders that stand for a name: ``gcn-vN.onnx``, ``runs/X``, ``<mode>``.
PLACEHOLDER = re.compile(r"(?:^|[/_-])(?:v?N|X|NAME|DIR)(?:[./_-]|$)|<")
#: File suffixes; ``opensearch/x.name`` with another suffix is module ``x``'s attribute ``name``.
SUFFIXES = {".py", ".md", ".json", ".jsonl", ".onnx", ".sh", ".yaml", ".yml", ".txt", ".toml"}
SUFFIXES |= {".csv", ".png", ".html", ".js", ".css", ".tex", ".xml", ".gz", ".cfg", ".lock"}
SUFFIXES |= {".pt", ".ini", ".conf", ".svg", ".tsv", ".zip", ".tar"}
#: Sections that describe files to create, not files that exist: (document, heading).
NEW_FILES = {("docs/architecture.md", "Where a new thing goes")}


def _sections(path: Path) -> Iterator[tuple[int, str]]:
    """(offset, text) of each ``## `` section, skipping the ones of :data:`NEW_FILES`."""
    text = path.read_text(encoding="utf-8")
    name = path.relative_to(REPO).as_posix()
    offset = 0
    for chunk in re.split(r"(?=^## )", text, flags=re.MULTILINE):
        heading = chunk.split("\n", 1)[0].removeprefix("## ").strip()
        if (name, heading) not in NEW_FILES:
            yield offset, chunk
        offset += len(chunk)


def named_paths(path: Path) -> Iterator[tuple[int, str]]:
    """(line, path from the repository root) of every repository path ``path`` names."""
    text = path.read_text(encoding="utf-8")
    for offset, chunk in _sections(path):
        for match in PATH.finditer(chunk):
            found = match.group(1)
            if not PLACEHOLDER.search(found):
                yield text.count("\n", 0, offset + match.start()) + 1, found
        for match in LINK.finditer(chunk):
            target = match.group(1).split("#", 1)[0]
            if target and not re.match(r"[a-z][a-z0-9+.-]*:", target):
                line = text.count("\n", 0, offset + match.start()) + 1
                resolved = Path(os.path.relpath(path.parent / target, REPO)).as_posix()
                if not resolved.startswith("../"):  # a link out of the repository is not ours
                    yield line, resolved


def exists(name: str) -> bool:
    """Whether ``name`` (a path, a glob, or ``module.attribute``) is in the repository."""
    if "*" in name:
        return bool(glob.glob(str(REPO / name)))
    target = REPO / name
    if not target.exists() and target.suffix and target.suffix not in SUFFIXES:
        target = target.with_suffix(".py")  # encoders/seq2seq_eval.score_k: a module's name
    return target.exists()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_named_paths_exist(doc: Path) -> None:
    missing = [
        f"{doc.name}:{line} {name}"
        for line, name in named_paths(doc)
        if not exists(name) and not (doc.parent / name).exists()
    ]
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_extraction_takes_repository_paths_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(__import__(__name__, fromlist=["REPO"]), "REPO", tmp_path)
    doc = tmp_path / "docs" / "x.md"
    doc.parent.mkdir()
    doc.write_text(
        "See `tests/cli/test_gone.py` and [tuning](tuning.md), then\n"
        "`../shared/data/hepth2003/equation.txt`, `runs/gcn/checkpoint.pt`,\n"
        "`report/best_profile.json`, https://opensearch.org/docs/latest/x,\n"
        "`export/models/gcn-vN.onnx` and `opensearch/modes/<mode>.py`.\n",
        encoding="utf-8",
    )
    found = [name for _, name in named_paths(doc)]
    assert found == ["tests/cli/test_gone.py", "docs/tuning.md"]
    assert not exists("tests/cli/test_gone.py")


def test_module_attributes_and_globs_resolve() -> None:
    assert exists("indexer/records.make_eq_id") and not exists("indexer/gone.make_eq_id")
    assert exists("tests/cli/test_*.py") and not exists("tests/cli/test_gone_*.py")
