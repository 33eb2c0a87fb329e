"""Figures of LaTeX sources: every ``figure`` / ``figure*`` environment as a :class:`FigureRecord`.

A record carries what the figure-embeddings seed (section 3, "Textual Representation of
Figures") represents a figure by: its caption, the text that mentions it (the sentence with a
``\\ref`` / ``\\autoref`` / ``\\cref`` / ``\\Cref`` / ``\\vref`` to its label, one sentence before
and one after, merged over all mentions) and its image (``\\includegraphics``, resolved against
the source folder and ``\\graphicspath`` with the usual extensions). ``references`` lists what
the document cites: ``\\cite`` keys and the names it gives in package-reference macros
(``\\pkg{x}``, ``\\sty{x}``, ``\\textsf{x}``, ...) and the arXiv papers it names
(``hep-th/0301085``, ``2101.01234`` for ``arXiv:2101.01234``) - the citation relation of the weak
supervision (:mod:`mathsearch.encoders.figure_data`, which matches an arXiv id to a file named
by its number).

The id is derived from ``(doc_id, position)`` like equation ids: ``<doc_id>#fig<position>``.
Malformed input becomes a :class:`~mathsearch.indexer.records.Failure` (stage ``extract``); nothing
raises
out of :func:`extract_figures`.

Example::

    captions = {
        item.fig_id: item.caption
        for item in extract_figures(["paper.tex"])
        if isinstance(item, FigureRecord)
    }
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mathsearch.indexer.records import Failure, excerpt, make_eq_id

logger = logging.getLogger(__name__)

__all__ = [
    "IMAGE_EXTENSIONS",
    "FigureRecord",
    "document_references",
    "extract_figures",
    "figures_of_file",
    "figures_of_text",
    "make_fig_id",
    "strip_latex",
]

#: Tried in order when ``\includegraphics`` names a file without extension.
IMAGE_EXTENSIONS = (".pdf", ".png", ".jpg", ".jpeg", ".eps", ".PDF", ".PNG", ".JPG")
#: Sentences before and after a mentioning sentence that are kept (seed: one each).
MENTION_WINDOW = 1
_MAX_INPUT_DEPTH = 4
_MAX_BYTES = 4 << 20

_COMMENT = re.compile(r"(?<!\\)%.*")
_BEGIN_FIG = re.compile(r"\\begin\{(figure\*?)\}")
_INPUT = re.compile(r"\\(?:input|include)\s*\{([^{}]+)\}")
_LABEL = re.compile(r"\\label\s*\{([^{}]*)\}")
_REF = re.compile(r"\\(?:ref|autoref|cref|Cref|vref|Vref|fref|Fref)\*?\s*\{([^{}]*)\}")
_CITE = re.compile(r"\\[a-zA-Z]*cite[a-zA-Z]*\*?(?:\s*\[[^\]]*\])*\s*\{([^{}]*)\}")
_PKG = re.compile(r"\\(?:pkg|package|Package|sty|cls|textsf|pack|ctanpkg)\s*\{([A-Za-z][\w-]*)\}")
#: Old-style (``archive/NNNNNNN``) and new-style (``arXiv:NNNN.NNNNN``) arXiv identifiers.
_ARXIV = re.compile(
    r"(?<![\w/.])([a-z]+(?:-[a-z]+)?(?:\.[A-Z]{2})?/\d{7})(?!\d)|arXiv:\s*(\d{4}\.\d{4,5})(?!\d)"
)
#: A crawled paper body: the file opens with ``\begin{document}`` (comments and blanks before).
_BODY_START = re.compile(rb"\A(?:\s|%[^\n]*\n)*\\begin\{document\}")
_GRAPHICSPATH = re.compile(r"\\graphicspath\s*\{((?:\s*\{[^{}]*\})+)\s*\}")
_INCLUDE = re.compile(r"\\includegraphics\*?\s*(?:\[[^\]]*\]\s*)*\{([^{}]+)\}")
_KEEP_ARG = re.compile(
    r"\\(?:textbf|textit|emph|texttt|textsf|textrm|textsc|underline|mbox|text|pkg|cls|sty|"
    r"package|cs|texttt|url|caption|footnote)\*?\s*(?:\[[^\]]*\])?\s*\{"
)
_DROP_ARG = re.compile(
    r"\\(?:label|ref|autoref|cref|Cref|vref|pageref|eqref|cite[a-zA-Z]*|includegraphics|"
    r"input|include|hspace|vspace|begin|end|centering|url|href|bibliography|"
    r"bibliographystyle|usepackage|documentclass|newcommand|renewcommand|def)\*?\s*"
    r"(?:\[[^\]]*\]\s*)*(?:\{[^{}]*\})?"
)
_COMMAND = re.compile(r"\\[A-Za-z@]+\*?|\\.")
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\\(])")


def make_fig_id(doc_id: str, position: int) -> str:
    """The idempotent figure id of ``(document id, position)``.

    >>> make_fig_id("floatrow/floatrow.tex", 2)
    'floatrow/floatrow.tex#fig2'
    """
    return make_eq_id(doc_id, f"fig{position}")


@dataclass
class FigureRecord:
    """One figure environment.

    ``position`` counts figures in the document from 0; ``caption`` and ``mentions`` are plain
    words (LaTeX stripped); ``images`` the ``\\includegraphics`` targets as resolved paths (the
    name as written when no file exists), ``image`` the first that exists (``None``: no image).
    """

    fig_id: str
    doc_id: str
    position: int
    label: str = ""
    caption: str = ""
    mentions: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)
    image: str | None = None
    references: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def has_image(self) -> bool:
        return self.image is not None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["has_image"] = self.has_image
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FigureRecord:
        known = set(cls.__dataclass_fields__)
        return cls(**{key: value for key, value in data.items() if key in known})

    def to_item(self) -> dict[str, Any]:
        """The item a figure embedder takes: ``caption``, ``mentions``, ``image``."""
        return {"caption": self.caption, "mentions": list(self.mentions), "image": self.image}


def _group(text: str, start: int) -> tuple[str, int] | None:
    """The balanced ``{...}`` group opening at ``text[start]``: (content, index after it)."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for index in range(start, len(text)):
        char = text[index]
        if char == "\\":
            continue
        if char == "{" and (index == 0 or text[index - 1] != "\\"):
            depth += 1
        elif char == "}" and text[index - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : index], index + 1
    return None


def _command_args(text: str, name: str) -> list[str]:
    """The mandatory argument of every ``\\name[opt]{arg}`` in ``text`` (balanced braces)."""
    out = []
    for match in re.finditer(rf"\\{name}\*?\s*(?:\[[^\]]*\]\s*)?(?=\{{)", text):
        found = _group(text, match.end())
        if found is not None:
            out.append(found[0])
    return out


def strip_latex(text: str) -> str:
    """``text`` as plain words: comments, math, labels, references and commands removed, the
    arguments of text-style commands kept.

    >>> strip_latex(r"The \\emph{CCD} layout (see \\ref{f:a}) with $x^2$ pixels.")
    'The CCD layout (see) with pixels.'
    """
    text = _COMMENT.sub("", text)
    text = _MATH.sub(" ", text)
    text = _DROP_ARG.sub(" ", text)
    text = _KEEP_ARG.sub("{", text)
    text = _COMMAND.sub(" ", text)
    text = text.replace("~", " ").replace("{", "").replace("}", "")
    text = re.sub(r"\s+([.,;:)])", r"\1", " ".join(text.split()))
    return text.strip()


def _without_comments(text: str) -> str:
    return "\n".join(_COMMENT.sub("", line) for line in text.splitlines())


def _read_tex(path: Path) -> str:
    data = path.read_bytes()[:_MAX_BYTES]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _inline_inputs(text: str, folder: Path, depth: int = 0) -> str:
    """``text`` with ``\\input``/``\\include`` of files in ``folder`` replaced by their text."""
    if depth >= _MAX_INPUT_DEPTH:
        return text

    def replace(match: re.Match[str]) -> str:
        name = match.group(1).strip()
        for candidate in (folder / name, folder / f"{name}.tex"):
            if candidate.is_file():
                try:
                    inner = _without_comments(_read_tex(candidate))
                except OSError:
                    return " "
                return _inline_inputs(inner, folder, depth + 1)
        return " "

    return _INPUT.sub(replace, text)


def _graphics_dirs(text: str, folder: Path) -> list[Path]:
    dirs = [folder]
    for match in _GRAPHICSPATH.finditer(text):
        dirs.extend(folder / d.strip() for d in re.findall(r"\{([^{}]*)\}", match.group(1)))
    return dirs


def _resolve_image(name: str, dirs: list[Path]) -> Path | None:
    name = name.strip().strip('"')
    for directory in dirs:
        base = directory / name
        if base.suffix and base.is_file():
            return base
        for ext in IMAGE_EXTENSIONS:
            candidate = base.with_name(base.name + ext)
            if candidate.is_file():
                return candidate
    return None


def _sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s for s in _SENTENCE_END.split(flat) if s.strip()]


def _mentions(sentences: list[str], label: str) -> list[str]:
    """Each sentence that references ``label`` with its neighbours (seed: one before and after),
    LaTeX stripped, in document order, without repeats."""
    if not label:
        return []
    keep: list[int] = []
    for index, sentence in enumerate(sentences):
        refs = {
            key.strip() for match in _REF.finditer(sentence) for key in match.group(1).split(",")
        }
        if label in refs:
            low, high = max(0, index - MENTION_WINDOW), index + MENTION_WINDOW + 1
            keep.extend(i for i in range(low, min(high, len(sentences))) if i not in keep)
    return [text for i in sorted(keep) if (text := strip_latex(sentences[i]))]


def document_references(text: str) -> list[str]:
    """What ``text`` cites: ``\\cite`` keys, package names of package-reference macros and arXiv
    ids.

    >>> document_references(r"\\cite{a,b} \\pkg{tikz} hep-th/9709229, gr-qc/0301128")
    ['a', 'b', 'gr-qc/0301128', 'hep-th/9709229', 'tikz']
    """
    found = {key.strip() for match in _CITE.finditer(text) for key in match.group(1).split(",")}
    found.update(match.group(1) for match in _PKG.finditer(text))
    found.update(match.group(1) or match.group(2) for match in _ARXIV.finditer(text))
    return sorted(key for key in found if key)


def _environments(text: str) -> Iterator[tuple[int, str, str | None]]:
    """``(start, body, error)`` of every figure environment; ``error`` when it is unclosed."""
    pos = 0
    while True:
        match = _BEGIN_FIG.search(text, pos)
        if match is None:
            return
        end = text.find(f"\\end{{{match.group(1)}}}", match.end())
        if end < 0:
            yield match.start(), text[match.start() : match.start() + 200], "unclosed-figure"
            return
        yield match.start(), text[match.end() : end], None
        pos = end + len(match.group(1)) + 6


def figures_of_text(
    text: str, doc_id: str, folder: str | os.PathLike[str] = ".", source: str = ""
) -> list[FigureRecord | Failure]:
    """The figures of one LaTeX document (``\\input`` already inlined or not needed)."""
    folder = Path(folder)
    text = _without_comments(text)
    dirs = _graphics_dirs(text, folder)
    references = document_references(text)
    bodies = list(_environments(text))
    body_text = _BEGIN_FIG.sub(" ", text)
    for _, body, _ in bodies:
        body_text = body_text.replace(body, " ", 1)
    sentences = _sentences(body_text)
    out: list[FigureRecord | Failure] = []
    for position, (_, body, error) in enumerate(bodies):
        fig_id = make_fig_id(doc_id, position)
        if error is not None:
            out.append(
                Failure(fig_id, doc_id, "extract", error, "no \\end{figure}", source, excerpt(body))
            )
            continue
        captions = _command_args(body, "caption") + _command_args(body, "subcaption")
        labels = _LABEL.findall(body)
        label = labels[-1].strip() if labels else ""
        names = [m.group(1) for m in _INCLUDE.finditer(body)]
        resolved = [_resolve_image(name, dirs) for name in names]
        images = [str(p) if p is not None else n for p, n in zip(resolved, names, strict=True)]
        present = next((str(p) for p in resolved if p is not None), None)
        mentions = list(  # document order per label, labels in order, no repeats
            dict.fromkeys(m for lab in labels for m in _mentions(sentences, lab.strip()))
        )
        out.append(
            FigureRecord(
                fig_id=fig_id,
                doc_id=doc_id,
                position=position,
                label=label,
                caption=" ".join(strip_latex(c) for c in captions).strip(),
                mentions=mentions,
                images=images,
                image=present,
                references=references,
                source=source,
            )
        )
    return out


def figures_of_file(path: str | os.PathLike[str], doc_id: str | None = None) -> list[Any]:
    """The figures of one ``.tex`` file (``\\input``/``\\include`` inlined); a Failure when the
    file cannot be read."""
    path = Path(path)
    doc_id = doc_id or path.stem
    try:
        text = _inline_inputs(_without_comments(_read_tex(path)), path.parent)
    except OSError as exc:
        return [
            Failure(make_fig_id(doc_id, 0), doc_id, "extract", "unreadable", str(exc), str(path))
        ]
    try:
        return list(figures_of_text(text, doc_id, path.parent, str(path)))
    except (ValueError, RecursionError) as exc:  # pragma: no cover - defensive
        return [
            Failure(make_fig_id(doc_id, 0), doc_id, "extract", "malformed", str(exc), str(path))
        ]


def _main_files(root: Path) -> Iterator[Path]:
    """The ``.tex`` files under ``root`` that are documents: they have ``\\documentclass``, or
    they open with ``\\begin{document}`` (a paper body as crawled, e.g. the shared hep-th
    documents; an ``\\input`` part does not open so)."""
    for path in sorted(root.rglob("*.tex")):
        try:
            head = path.read_bytes()[:_MAX_BYTES]
        except OSError:
            continue
        if b"\\documentclass" in head or _BODY_START.match(head):
            yield path


def extract_figures(
    paths: Iterable[str | os.PathLike[str]],
) -> Iterator[FigureRecord | Failure]:
    """Figures of ``.tex`` files and folders.

    A file is one document (id: its stem); a folder is searched for documents (``.tex`` files
    with ``\\documentclass`` or opening with ``\\begin{document}``, id: the path relative to the
    folder, e.g. ``floatrow/fr-doc.tex`` or ``0301085.tex``).
    """
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for file in _main_files(path):
                yield from figures_of_file(file, file.relative_to(path).as_posix())
        elif path.is_file():
            yield from figures_of_file(path)
        else:
            doc_id = path.stem
            yield Failure(
                make_fig_id(doc_id, 0), doc_id, "extract", "missing", "no such file", str(path)
            )
