"""Build the real figure corpus: LaTeX documents with figure environments from Debian's TeX Live
documentation packages.

Usage::

    python -m research.fetch_figure_corpus [--cache /var/cache/mathsearch/figure-corpus] [--json]

Steps (each skipped when its output is already there, so a re-run is cheap):

1. ``apt-get download`` the Debian 12 packages in :data:`PACKAGES` into ``CACHE/debs`` (the
   ``.tex`` sources of real manuals, articles, theses and class samples, with their figure
   files; licences: see each package's ``/usr/share/doc/<package>/copyright``, mostly LPPL,
   GPL and public domain);
2. ``dpkg-deb -x`` them into ``CACHE/extracted``;
3. copy every documentation folder (``texlive-doc/<kind>/<name>``) that holds a ``.tex`` file
   with ``\\documentclass`` and a ``figure``/``figure*`` environment into ``CACHE/corpus/<name>``
   (Debian gzips documentation: ``*.gz`` files are unpacked), keeping sources (``.tex``,
   ``.bib``, ``.sty``, ``.cls``) and images (``.png``, ``.jpg``, ``.jpeg``, ``.pdf``, ``.eps``)
   up to 8 MB each;
4. write ``CACHE/corpus/MANIFEST.json``: the packages with their versions and SHA-256, and the
   folders and files copied.

``mathsearch train figure CACHE/corpus --out DIR`` then trains on it: one folder is one article
(see docs/encoder-figure.md for the citation relation between folders).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Debian 12 (bookworm) TeX Live documentation packages the corpus is built from.
PACKAGES = (
    "texlive-publishers-doc",
    "texlive-science-doc",
    "texlive-latex-extra-doc",
    "texlive-latex-recommended-doc",
)
DEFAULT_CACHE = Path("/var/cache/mathsearch/figure-corpus")
KEEP = {".tex", ".bib", ".sty", ".cls", ".png", ".jpg", ".jpeg", ".pdf", ".eps"}
MAX_BYTES = 8 << 20
_FIGURE = re.compile(rb"\\begin\{figure\*?\}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(cache: Path) -> list[dict[str, str]]:
    """The ``.deb`` files of :data:`PACKAGES` in ``cache/debs`` (downloaded when missing)."""
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [p for p in PACKAGES if not list(debs.glob(f"{p}_*.deb"))]
    if missing:
        subprocess.run(["apt-get", "download", *missing], cwd=debs, check=True)
    out = []
    for package in PACKAGES:
        (deb,) = sorted(debs.glob(f"{package}_*.deb"))[-1:]
        out.append({"package": package, "file": deb.name, "sha256": _sha256(deb)})
    return out


def unpack(cache: Path, debs: list[dict[str, str]]) -> Path:
    """``dpkg-deb -x`` every package into ``cache/extracted``; returns the texlive-doc root."""
    target = cache / "extracted"
    marker = target / ".unpacked"
    names = "\n".join(d["file"] for d in debs)
    if not marker.is_file() or marker.read_text() != names:
        target.mkdir(parents=True, exist_ok=True)
        for deb in debs:
            subprocess.run(
                ["dpkg-deb", "-x", str(cache / "debs" / deb["file"]), str(target)], check=True
            )
        marker.write_text(names)
    return target / "usr" / "share" / "doc" / "texlive-doc"


def _read(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def _has_figure_document(folder: Path) -> bool:
    for path in folder.rglob("*"):
        if path.name.endswith((".tex", ".tex.gz")) and path.is_file():
            try:
                data = _read(path)
            except (OSError, EOFError, gzip.BadGzipFile):
                continue
            if b"\\documentclass" in data and _FIGURE.search(data):
                return True
    return False


def collect(doc_root: Path, corpus: Path) -> list[dict[str, Any]]:
    """Copy the documentation folders with figures into ``corpus`` (see the module docstring)."""
    corpus.mkdir(parents=True, exist_ok=True)
    folders: list[dict[str, Any]] = []
    for kind in sorted(p for p in doc_root.iterdir() if p.is_dir()):
        for folder in sorted(p for p in kind.iterdir() if p.is_dir()):
            if not _has_figure_document(folder):
                continue
            name = (
                folder.name if not (corpus / folder.name).exists() else f"{kind.name}-{folder.name}"
            )
            files = 0
            for path in sorted(folder.rglob("*")):
                plain = path.name[:-3] if path.name.endswith(".gz") else path.name
                if not path.is_file() or Path(plain).suffix.lower() not in KEEP:
                    continue
                try:
                    data = _read(path)
                except (OSError, EOFError, gzip.BadGzipFile):
                    continue
                if len(data) > MAX_BYTES:
                    continue
                rel = path.relative_to(folder).with_name(plain)
                dest = corpus / name / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
                files += 1
            folders.append({"name": name, "from": f"{kind.name}/{folder.name}", "files": files})
    return folders


def build(cache: Path) -> dict[str, Any]:
    """Run every step; returns the manifest."""
    debs = download(cache)
    doc_root = unpack(cache, debs)
    corpus = cache / "corpus"
    manifest_path = corpus / "MANIFEST.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("packages") == debs:
            return manifest
        shutil.rmtree(corpus)
    folders = collect(doc_root, corpus)
    manifest = {
        "source": "Debian 12 TeX Live documentation packages (apt-get download)",
        "packages": debs,
        "licence": "per package: /usr/share/doc/<package>/copyright inside each .deb",
        "folders": folders,
    }
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="default %(default)s")
    parser.add_argument("--json", action="store_true", help="print the manifest")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    try:
        manifest = build(args.cache)
    except (OSError, subprocess.CalledProcessError, ValueError) as exc:
        sys.stderr.write(f"fetch_figure_corpus: error: {exc}\n")
        return 1
    if args.json:
        sys.stdout.write(json.dumps(manifest, indent=2) + "\n")
    else:
        files = sum(f["files"] for f in manifest["folders"])
        sys.stdout.write(
            f"{len(manifest['folders'])} folders, {files} files in {args.cache / 'corpus'}\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
