"""Seeded bad inputs for every source format, made from real equations (the fuzzing corpus).

:func:`generate` makes input ``number`` of a run from ``(seed, number)`` alone, so any input a
bench reports can be made again. Formats and what their inputs hold:

=========  ==================================================================================
format     inputs
=========  ==================================================================================
``latex``  one equation record as a worker receives it: real LaTeX (hep-th, ARQMath, NTCIR)
           mutated (:mod:`mathsearch.bench.fuzz_mutators`), 10^3-10^5-deep nesting, macro bombs,
           huge
           strings (MBs), random text; or real MathML, mutated or 10^4-deep
``tex``    a ``.tex`` document of real equations in mutated environments (missing ``\\end``,
           mismatched names, unbalanced braces, recursive ``\\newcommand``), byte-mutated,
           with invalid UTF-8 or Latin-1, or a truncated ``.tex.gz``
``jats``   a JATS article with MathML and ``tex-math``; or an XML bomb (billion laughs,
           quadratic blowup), an external entity (XXE, ``file:///etc/passwd``), a parameter
           entity, 10^4-10^5-deep elements, broken MathML, a lying encoding declaration,
           byte-mutated, a gzip bomb
``jsonl``  lines of equations and documents, broken JSON, 10^5-deep arrays, wrong types,
           1 KB ids, invalid UTF-8, huge lines, a truncated ``.jsonl.gz``
``hepth``  consecutive real record lines of ``hepth2003/*.txt``, line- and byte-mutated, or a
           truncated ``.txt.xz``
=========  ==================================================================================

Hypothesis strategies of the same inputs: :func:`fuzz_inputs` and :func:`latex_strings`.

Example::

    corpus = Corpus.load()
    first = generate(corpus, seed=1, number=0)        # FuzzInput(fmt="latex", kind=..., ...)
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathsearch.bench import fuzz_mutators as mut
from mathsearch.core.paths import SHARED_DATA as _SHARED_DATA

logger = logging.getLogger(__name__)

FORMATS = ("latex", "tex", "jats", "jsonl", "hepth")
SHARED_DATA = _SHARED_DATA
MATHML_NS = "http://www.w3.org/1998/Math/MathML"
#: What a format's maker returns: (kind, data, file suffix, field).
Made = tuple[str, str | bytes, str, str]


@dataclass(frozen=True)
class FuzzInput:
    """One generated input: a file's bytes (``name`` is its file name) or, for ``latex``, the
    equation text of one record (``field``: ``latex`` or ``mathml``) or a whole JSON record
    with one bad field (``field``: ``record``; its ``eq_id`` is set by the runner)."""

    number: int
    fmt: str
    kind: str
    data: bytes | str
    name: str
    field: str = "latex"

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class Corpus:
    """Real material the inputs are made of: LaTeX equations, MathML, hep-th record lines."""

    equations: tuple[str, ...]
    mathml: tuple[str, ...]
    hepth_lines: tuple[str, ...]

    @classmethod
    @functools.cache
    def load(cls, data_dir: Path | None = None, limit: int = 4000) -> Corpus:
        """Equations of ``hepth2003/*.txt`` and the ARQMath/NTCIR topics under ``data_dir``
        (default ``../shared/data``), else the bundled hep-th sample."""
        from mathsearch.indexer.hepth import bundled_sample_lines

        root = data_dir or SHARED_DATA
        lines: list[str] = []
        for name in ("equation.txt", "eqnarray.txt"):
            path = root / "hepth2003" / name
            if path.is_file():
                with path.open(encoding="utf-8", errors="surrogateescape") as handle:
                    lines += itertools.islice(handle, limit * 3)
        if not lines:
            lines = bundled_sample_lines()
        equations = _record_equations(lines, limit) + _topic_formulas(root / "mathir-topics")
        return cls(tuple(equations), tuple(_to_mathml(equations[:300])), tuple(lines))


def _record_equations(lines: list[str], limit: int) -> list[str]:
    from mathsearch.indexer.hepth import iter_hepth
    from mathsearch.indexer.records import EquationRecord

    found = (r.latex for r in iter_hepth(lines) if isinstance(r, EquationRecord) and r.latex)
    return list(itertools.islice(found, limit))


def _topic_formulas(folder: Path) -> list[str]:
    formulas: list[str] = []
    for path in sorted(folder.glob("*.txt")) if folder.is_dir() else ():
        for line in path.read_text("utf-8", errors="replace").splitlines():
            parts = line.split("\t", 1)
            if len(parts) == 2 and parts[1].strip():
                formulas.append(parts[1].strip())
    return formulas


def _to_mathml(equations: list[str]) -> list[str]:
    from mathsearch.indexer.errors import IndexerError
    from mathsearch.indexer.latex_to_mathml import latex_to_mathml
    from mathsearch.indexer.mathml_tree import to_mathml

    out = []
    for latex in equations:
        try:
            out.append(to_mathml(latex_to_mathml(latex).tree))
        except (IndexerError, RecursionError):
            continue
    return out or [f'<math xmlns="{MATHML_NS}"><mi>x</mi></math>']


def weighted(rng: random.Random, choices: dict[str, float]) -> str:
    return rng.choices(tuple(choices), weights=tuple(choices.values()))[0]


def fuzz_latex(
    rng: random.Random, corpus: Corpus, huge: float = 0.01, deepest: int = 100_000
) -> tuple[str, str]:
    """(kind, LaTeX) of one bad equation (``huge``: the share of MB-sized ones, ``deepest``:
    the deepest nesting made; documents use smaller ones to keep a run fast)."""
    kind = weighted(
        rng,
        {"real": 0.15, "mutated": 0.6, "deep": 0.08, "bomb": 0.05, "huge": huge,
         "random": 0.08, "empty": 0.03},
    )  # fmt: skip
    pool = corpus.equations
    if kind == "real":
        return kind, rng.choice(pool)
    if kind == "mutated":
        text, names = mut.mutate_latex(rng, rng.choice(pool), pool)
        return f"mutated:{names}", text
    if kind == "deep":
        depth = min(deepest, rng.choice((200, 1000, 10_000, 100_000)))
        return f"deep:{depth}", mut.deep_nesting(rng, depth)
    if kind == "bomb":
        return kind, mut.macro_bomb(rng) + rng.choice(pool)
    if kind == "huge":
        return kind, mut.huge_latex(rng, rng.choice((100_000, 1_000_000, 3_000_000)), pool)
    if kind == "random":
        size = rng.randint(1, 200)
        return kind, "".join(chr(rng.randrange(0x110000)) for _ in range(size))
    return kind, rng.choice(("", " ", "\n\t", "{}", "\\"))


_BAD_FIELDS: tuple[dict[str, Any], ...] = (
    {"position": "x"}, {"position": -1}, {"position": 2**40}, {"position": True},
    {"latex": 5}, {"latex": ["x"]}, {"mathml": {"x": 1}}, {"section": 5}, {"context": [1]},
    {"extra": "x"}, {"extra": {"keywords": 5}}, {"extra": {"keywords": [{"a": 1}]}},
    {"extra": {"keywords": "kw"}}, {"doc_id": None}, {"source": 1.5}, {"unknown": {"deep": [1]}},
)  # fmt: skip


def latex_input(rng: random.Random, corpus: Corpus) -> Made:
    if rng.random() < 0.1:  # a record as a client may send it to the workers, one field bad
        bad = rng.choice(_BAD_FIELDS)
        record = {"doc_id": "d", "position": 0, "latex": rng.choice(corpus.equations), **bad}
        return f"record:{next(iter(bad))}", json.dumps(record), "", "record"
    if rng.random() < 0.2:
        kind, mathml = fuzz_mathml(rng, corpus)
        return f"mathml:{kind}", mathml, "", "mathml"
    kind, latex = fuzz_latex(rng, corpus)
    return kind, latex, "", "latex"


def fuzz_mathml(rng: random.Random, corpus: Corpus) -> tuple[str, str]:
    """(kind, MathML) of one bad MathML equation."""
    base = rng.choice(corpus.mathml)
    kind = weighted(rng, {"real": 0.2, "mutated": 0.5, "deep": 0.1, "dtd": 0.1, "html": 0.1})
    if kind == "mutated":
        text, names = mut.mutate_latex(rng, base, corpus.mathml)
        return f"mutated:{names}", text
    if kind == "deep":
        depth = rng.choice((300, 10_000, 100_000))
        nested = "<mrow>" * depth + "<mi>x</mi>" + "</mrow>" * depth
        return f"deep:{depth}", f'<math xmlns="{MATHML_NS}">{nested}</math>'
    if kind == "dtd":
        return kind, BILLION_LAUGHS.replace("ROOT", "math") + base
    if kind == "html":
        spans = "<span>" * rng.randint(1, 3000)
        return kind, f'<span class="katex"><span class="katex-mathml">{base}</span>{spans}'
    return kind, base


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE ROOT [\n<!ENTITY lol "lol">\n'
    + "".join(
        f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'
        for i in range(1, 10)
    )
    + "]>\n"
)


def latex_strings(corpus: Corpus | None = None) -> Any:
    """A hypothesis strategy of hostile LaTeX: arbitrary text (surrogates included), real
    equations with hypothesis-chosen insertions, and the generated bad equations."""
    from hypothesis import strategies as st

    source = corpus or Corpus.load()
    pieces = st.sampled_from(mut.COMMANDS) | st.text(max_size=8) | st.sampled_from("{}^_&\\$#%")
    spliced = st.builds(
        lambda base, cut, piece: base[:cut] + piece + base[cut:],
        st.sampled_from(source.equations),
        st.integers(0, 200),
        pieces,
    )
    generated = st.builds(
        lambda seed: fuzz_latex(random.Random(seed), source)[1], st.integers(0, 2**32)
    )
    return st.text(max_size=300) | spliced | generated
