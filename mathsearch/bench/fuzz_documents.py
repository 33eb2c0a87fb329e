"""Whole-document fuzz inputs of :mod:`mathsearch.bench.fuzz_inputs`: ``.tex``, JATS, JSONL,
hep-th.

Each ``*_input(rng, corpus)`` returns ``(kind, data, file suffix, field)``; see the table in
:mod:`mathsearch.bench.fuzz_inputs` for what each format's inputs hold. :func:`generate` picks
input ``number`` of a run over every format (equations and documents), :func:`fuzz_inputs` is
the same as a hypothesis strategy.
"""

from __future__ import annotations

import gzip
import json
import logging
import lzma
import random
from typing import Any

from mathsearch.bench import fuzz_mutators as mut
from mathsearch.bench.fuzz_inputs import (
    BILLION_LAUGHS,
    FORMATS,
    MATHML_NS,
    Corpus,
    FuzzInput,
    Made,
    fuzz_latex,
    fuzz_mathml,
    latex_input,
    weighted,
)

logger = logging.getLogger(__name__)


def _tex_equation(rng: random.Random, corpus: Corpus) -> str:
    env = rng.choice(("equation", "equation*", "eqnarray", "align", "gather", "$$", "\\["))
    latex = (
        rng.choice(corpus.equations)
        if rng.random() < 0.5
        else fuzz_latex(rng, corpus, 0, 10_000)[1]
    )
    if env == "$$":
        return f"$${latex}$$"
    if env == "\\[":
        return f"\\[{latex}\\]"
    if env in ("eqnarray", "align") and rng.random() < 0.7:
        latex = f"{latex} \\\\ {rng.choice(corpus.equations)} \\nonumber"
    end = env if rng.random() < 0.85 else rng.choice(("equaton", "align*", "", env + "}"))
    closing = f"\\end{{{end}}}" if rng.random() < 0.9 else ""
    return f"\\begin{{{env}}}\n{latex}\n{closing}"


def tex_input(rng: random.Random, corpus: Corpus) -> Made:
    macros = ["\\newcommand{\\be}{\\begin{equation}}", "\\newcommand{\\ee}{\\end{equation}}"]
    if rng.random() < 0.2:
        macros.append(mut.macro_bomb(rng))
    parts = ["\\documentclass{article}", *macros, "\\begin{document}"]
    for section in range(rng.randint(1, 2)):
        parts.append(f"\\section{{Part {section} {rng.choice(corpus.equations)[:40]}}}")
        for _ in range(rng.randint(1, 2)):
            parts.append("Some prose about $x$ and the result below.")
            parts.append(_tex_equation(rng, corpus))
    parts.append("\\be " + rng.choice(corpus.equations) + " \\ee")
    parts.append("\\end{document}")
    text = "\n".join(parts)
    kind = weighted(rng, {"document": 0.35, "bytes": 0.4, "latin1": 0.1, "deep": 0.05, "gz": 0.1})
    data = text.encode("utf-8", "surrogatepass")
    if kind == "bytes":
        data, names = mut.mutate_bytes(rng, data)
        return f"bytes:{names}", data, ".tex", "latex"
    if kind == "latin1":
        return kind, text.encode("latin-1", "replace") + b"\xe9\xfc", ".tex", "latex"
    if kind == "deep":
        depth = rng.choice((10_000, 100_000))
        deep = f"\\begin{{document}}\\section{{{'{' * depth}}}\\[{'{' * depth}x{'}' * depth}\\]"
        return f"deep:{depth}", deep.encode(), ".tex", "latex"
    if kind == "gz":
        packed = gzip.compress(data)
        return "gz-truncated", packed[: rng.randrange(10, len(packed))], ".tex.gz", "latex"
    return kind, data, ".tex", "latex"


def _jats_formula(rng: random.Random, corpus: Corpus, number: int) -> str:
    mathml = rng.choice(corpus.mathml).replace("<math", "<mml:math", 1)
    mathml = mathml.replace("</math>", "</mml:math>").replace(f'xmlns="{MATHML_NS}"', "")
    tex = rng.choice(corpus.equations).replace("]]>", "")
    body = rng.choice(
        (
            mathml,
            f"<tex-math><![CDATA[{tex}]]></tex-math>",
            f"<alternatives>{mathml}<tex-math><![CDATA[$${tex}$$]]></tex-math></alternatives>",
            "<graphic/>",
        )
    )
    return f'<disp-formula id="e{number}">{body}</disp-formula>'


def _jats_article(rng: random.Random, corpus: Corpus, doctype: str = "") -> str:
    sections = "".join(
        f"<sec><title>Section {s}</title><p>Text before "
        + "".join(_jats_formula(rng, corpus, 10 * s + n) for n in range(rng.randint(1, 3)))
        + " and after.</p></sec>"
        for s in range(rng.randint(1, 3))
    )
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n{doctype}'
        f'<article xmlns:mml="{MATHML_NS}"><front><article-meta>'
        f'<article-id pub-id-type="doi">10.1/fz.{rng.randrange(10**6)}</article-id>'
        f"</article-meta></front><body>{sections}</body></article>"
    )


def jats_input(rng: random.Random, corpus: Corpus) -> Made:
    kind = weighted(
        rng,
        {"article": 0.25, "bytes": 0.3, "billion-laughs": 0.05, "quadratic": 0.03, "xxe": 0.05,
         "parameter-entity": 0.02, "external-dtd": 0.03, "deep": 0.06, "broken-mathml": 0.12,
         "encoding": 0.06, "gzip-bomb": 0.005, "gz-truncated": 0.025},
    )  # fmt: skip
    if kind == "billion-laughs":
        body = BILLION_LAUGHS.replace("ROOT", "article") + "<article><p>&lol9;</p></article>"
        return kind, body.encode(), ".xml", "latex"
    if kind == "quadratic":
        big = "a" * 50_000
        body = f'<!DOCTYPE article [<!ENTITY a "{big}">]><article>{"&a;" * 50_000}</article>'
        return kind, body.encode(), ".xml", "latex"
    if kind in ("xxe", "parameter-entity", "external-dtd"):
        doctype = {
            "xxe": '<!DOCTYPE article [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n',
            "parameter-entity": '<!DOCTYPE article [<!ENTITY % p SYSTEM "http://127.0.0.1:1/x">%p;]>\n',
            "external-dtd": '<!DOCTYPE article SYSTEM "http://127.0.0.1:1/evil.dtd">\n',
        }[kind]
        text = _jats_article(rng, corpus, doctype).replace("Text before", "Text &xxe; before")
        return kind, text.encode(), ".xml", "latex"
    if kind == "deep":
        depth = rng.choice((300, 10_000, 100_000))
        inner = rng.choice(("sec", "mml:mrow", "p"))
        deep = f"<{inner}>" * depth + f"</{inner}>" * depth
        math = f'<mml:math xmlns:mml="{MATHML_NS}">{deep}</mml:math>'
        formula = f"<disp-formula>{math}</disp-formula>"
        body = f"<article><body><sec>{formula if 'mml' in inner else deep}</sec></body></article>"
        return f"deep:{depth}:{inner}", body.encode(), ".xml", "latex"
    text = _jats_article(rng, corpus)
    if kind == "broken-mathml":
        text, names = mut.mutate_latex(rng, text, corpus.mathml)
        return f"broken-mathml:{names}", text.encode("utf-8", "surrogatepass"), ".xml", "latex"
    if kind == "encoding":
        declared = rng.choice(("ISO-8859-1", "UTF-16", "bogus-enc", "ascii", "UTF-8"))
        data = text.replace("UTF-8", declared).encode("utf-8") + rng.choice((b"", b"\xff\xfe"))
        return f"encoding:{declared}", data, ".xml", "latex"
    if kind == "gzip-bomb":
        return kind, gzip.compress(b"<article>" + b" " * 60_000_000, 9), ".xml.gz", "latex"
    data = text.encode()
    if kind == "gz-truncated":
        packed = gzip.compress(data)
        return kind, packed[: rng.randrange(10, len(packed))], ".xml.gz", "latex"
    if kind == "bytes":
        data, names = mut.mutate_bytes(rng, data)
        return f"bytes:{names}", data, ".xml", "latex"
    return kind, data, ".xml", "latex"


def _jsonl_line(rng: random.Random, corpus: Corpus, number: int) -> tuple[str, bytes]:
    kind = weighted(
        rng,
        {"equation": 0.3, "document": 0.15, "broken-json": 0.1, "deep-json": 0.04,
         "wrong-type": 0.1, "long-id": 0.05, "empty-id": 0.04, "invalid-utf8": 0.1,
         "huge": 0.01, "mathml": 0.06, "not-object": 0.05},
    )  # fmt: skip
    latex = (
        fuzz_latex(rng, corpus, 0, 10_000)[1]
        if rng.random() < 0.6
        else rng.choice(corpus.equations)
    )
    obj: Any = {"latex": latex}
    if kind == "equation" and rng.random() < 0.5:
        obj = {"eq_id": f"e{number}", "doc_id": "d", "position": number, "latex": latex}
    elif kind == "document":
        obj = {
            "doc_id": f"doc{number}",
            "text": f"Intro \\begin{{equation}}{latex}\\end{{equation}}",
        }
    elif kind == "wrong-type":
        obj = rng.choice(
            ({"latex": 5}, {"latex": ["x"]}, {"eq_id": {}, "latex": "x"}, {"text": 1, "id": "d"},
             {"latex": "x", "position": "first"}, {"mathml": None, "latex": None},
             {"text": "x", "id": None},
             {"latex": "x", "keywords": 5}, {"latex": "x", "keywords": [{"a": 1}]},
             {"latex": "x", "extra": {"keywords": "kw"}}, {"latex": "x", "position": 10**30},
             {"latex": "x", "section": {"t": 1}}, {"latex": "x", "doc_id": 1.5},
             {"latex": "x", "extra": []})
        )  # fmt: skip
    elif kind == "long-id":
        obj = {"eq_id": "i" * rng.choice((300, 600, 2000)), "latex": latex}
    elif kind == "empty-id":
        obj = {"eq_id": "", "doc_id": "", "latex": latex}
    elif kind == "mathml":
        obj = {"mathml": fuzz_mathml(rng, corpus)[1]}
    elif kind == "not-object":
        obj = rng.choice(([1, 2], "x", 3, None, True))
    line = json.dumps(obj, ensure_ascii=rng.random() < 0.5)
    data = line.encode("utf-8", "surrogatepass")
    if kind == "broken-json":
        data = data[: rng.randrange(len(data))] + rng.choice((b"", b"}", b",", b"\\"))
    elif kind == "deep-json":
        depth = rng.choice((1000, 100_000))
        data = b"[" * depth + b"]" * depth
    elif kind == "invalid-utf8":
        data = mut.BYTE_MUTATIONS["invalid-utf8"](rng, data)
    elif kind == "huge":
        data = json.dumps({"latex": mut.huge_latex(rng, 2_000_000, corpus.equations)}).encode()
    return kind, data


def jsonl_input(rng: random.Random, corpus: Corpus) -> Made:
    lines = [_jsonl_line(rng, corpus, n) for n in range(rng.randint(1, 4))]
    kinds = sorted({kind for kind, _ in lines})
    data = b"\n".join(line for _, line in lines) + (b"\n" if rng.random() < 0.8 else b"")
    if rng.random() < 0.05:
        packed = gzip.compress(data)
        return "gz-truncated", packed[: rng.randrange(10, len(packed))], ".jsonl.gz", "latex"
    return "+".join(kinds), data, ".jsonl", "latex"


def hepth_input(rng: random.Random, corpus: Corpus) -> Made:
    lines = corpus.hepth_lines
    start = rng.randrange(max(1, len(lines) - 40))
    chunk = list(lines[start : start + rng.randint(3, 15)])
    kind = weighted(
        rng,
        {"records": 0.2, "lines": 0.25, "bytes": 0.35, "deep": 0.05, "xz": 0.05, "huge": 0.03},
    )
    if kind == "lines":
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(chunk))
            op = rng.choice(("drop", "dup", "swap", "marker"))
            if op == "drop":
                del chunk[at]
            elif op == "dup":
                chunk.insert(at, chunk[at])
            elif op == "swap":
                other = rng.randrange(len(chunk))
                chunk[at], chunk[other] = chunk[other], chunk[at]
            else:
                chunk[at] = chunk[at].rstrip("\n") + rng.choice(
                    ("->2003/x.tex\n", "->\n", "->HEP/9999/0.tex\n")
                )
            if not chunk:
                chunk = ["\\begin{equation}x\\end{equation}->2003/0.tex\n"]
    text = "".join(chunk)
    if kind == "deep":
        depth = rng.choice((10_000, 100_000))
        text += (
            "\\begin{equation}"
            + "{" * depth
            + "x"
            + "}" * depth
            + "\\end{equation}->2003/0301999.tex\n"
        )
    if kind == "huge":
        big = mut.huge_latex(rng, rng.choice((30_000, 1_000_000)), corpus.equations)
        text += f"\\begin{{equation}}{big}\\end{{equation}}->2003/0301998.tex\n"
    data = text.encode("utf-8", "surrogateescape")
    if kind == "bytes":
        data, names = mut.mutate_bytes(rng, data)
        return f"bytes:{names}", data, ".txt", "latex"
    if kind == "xz":
        packed = lzma.compress(data)
        return "xz-truncated", packed[: rng.randrange(10, len(packed))], ".txt.xz", "latex"
    return kind, data, ".txt", "latex"


def generate(
    corpus: Corpus, seed: int, number: int, formats: tuple[str, ...] = FORMATS
) -> FuzzInput:
    """Input ``number`` of the run ``seed``: format ``formats[number % len(formats)]``."""
    fmt = formats[number % len(formats)]
    rng = random.Random(f"{seed}:{number}:{fmt}")
    makers = {"latex": latex_input, "tex": tex_input, "jats": jats_input}
    maker = {**makers, "jsonl": jsonl_input, "hepth": hepth_input}[fmt]
    kind, data, suffix, field = maker(rng, corpus)
    name = f"fz{number}{suffix}"
    return FuzzInput(number, fmt, kind, data, name, field)


def fuzz_inputs(formats: tuple[str, ...] = FORMATS, corpus: Corpus | None = None) -> Any:
    """A hypothesis strategy of :class:`FuzzInput` of ``formats`` (seed and number drawn)."""
    from hypothesis import strategies as st

    source = corpus or Corpus.load()
    return st.builds(
        lambda seed, number, fmt: generate(source, seed, number, (fmt,)),
        st.integers(0, 2**32),
        st.integers(0, 10**6),
        st.sampled_from(formats),
    )
