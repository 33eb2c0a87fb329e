"""Mutations of real LaTeX and of whole source files, for :mod:`mathsearch.bench.fuzz_inputs`.

Every function takes a seeded :class:`random.Random` and returns a new value; nothing here is
random without it, so an input is reproducible from ``(seed, number)``.

============================  ==============================================================
mutation (``LATEX_MUTATIONS``)  what it does to one equation
============================  ==============================================================
``flip``                      replaces a few characters by random ones (any code point)
``truncate``                  cuts the equation at a random point
``delete`` / ``duplicate``    deletes / duplicates a random span
``insert``                    inserts a span of another real equation
``braces``                    adds or removes ``{`` / ``}`` (unbalanced groups)
``left-right``                adds a lone ``\\left(`` or ``\\right)``, or drops one of a pair
``command``                   inserts a random (known or unknown) command or a special char
``controls``                  inserts NUL, control characters, U+FFFD, BOMs
``surrogates``                inserts lone surrogates (not encodable as UTF-8)
``bidi``                      inserts RTL marks, RTL letters and combining marks
``macro-bomb``                prefixes a recursive ``\\def`` / ``\\newcommand``
============================  ==============================================================

Byte mutations (``BYTE_MUTATIONS``) work on the encoded file: ``flip``, ``truncate``,
``delete``, ``duplicate``, ``invalid-utf8`` (overlong forms, lone continuation bytes, cut
multi-byte sequences, encoded surrogates, 0xFE/0xFF) and ``nul``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

#: Commands inserted by the ``command`` mutation: real ones, environment pieces, unknown ones.
COMMANDS = (
    "\\frac",
    "\\sqrt",
    "\\left(",
    "\\right)",
    "\\left.",
    "\\right|",
    "\\begin{array}{cc}",
    "\\end{array}",
    "\\begin{matrix}",
    "\\end{pmatrix}",
    "\\\\",
    "&",
    "^",
    "_",
    "^^",
    "__",
    "#",
    "#1",
    "$",
    "%",
    "~",
    "\\",
    "\\mathrm",
    "\\operatorname",
    "\\text{",
    "\\mbox{",
    "\\over",
    "\\choose",
    "\\atop",
    "\\limits",
    "\\not",
    "\\stackrel",
    "\\overset",
    "\\underbrace",
    "\\xrightarrow",
    "\\hbox to",
    "\\def",
    "\\newcommand",
    "\\renewcommand",
    "\\let",
    "\\csname",
    "\\endcsname",
    "\\expandafter",
    "\\catcode`\\{=12",
    "\\input{/etc/passwd}",
    "\\include{../../x}",
    "\\unknowncommandxyz",
    "\\@@",
    "\\begin{document}",
    "\\end{document}",
    "\\label{",
    "\\color{red}",
    "\\kern-3pt",
    "\\rule{1cm}{2cm}",
    "\\ensuremath{",
    "\\displaystyle",
    "\\big(",
    "\\Bigr]",
)
_CONTROLS = "\x00\x01\x07\x08\x0b\x0c\x1b\x7f\x85\u2028\u2029\ufeff\ufffd\ufffe\uffff"
_SURROGATES = ("\ud800", "\udfff", "\udc80", "\ud83d")
_BIDI = (
    "\u200e\u200f\u202a\u202b\u202d\u202e\u2066\u2067\u2069"  # direction marks
    "\u05d0\u05d1\u0627\u0644"  # Hebrew, Arabic letters
    "\u0301\u0308\u20d7\u0338"  # combining marks
)
_INVALID_UTF8 = (
    b"\xff",
    b"\xfe",
    b"\x80",
    b"\xbf\xbf",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
)


def _span(rng: random.Random, size: int) -> tuple[int, int]:
    start = rng.randrange(size + 1)
    return start, min(size, start + rng.randint(1, max(1, min(64, size))))


def _insert(rng: random.Random, text: str, piece: str) -> str:
    at = rng.randrange(len(text) + 1)
    return text[:at] + piece + text[at:]


def _flip(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    chars = list(text) or [" "]
    for _ in range(rng.randint(1, 4)):
        code = rng.randrange(32, 127) if rng.random() < 0.7 else rng.randrange(0x110000)
        chars[rng.randrange(len(chars))] = chr(code)
    return "".join(chars)


def _truncate(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    return text[: rng.randrange(len(text) + 1)]


def _delete(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    start, end = _span(rng, len(text))
    return text[:start] + text[end:]


def _duplicate(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    start, end = _span(rng, len(text))
    return text[:end] + text[start:end] * rng.randint(1, 8) + text[end:]


def _insert_other(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    other = rng.choice(pool) if pool else "x"
    start, end = _span(rng, len(other))
    return _insert(rng, text, other[start:end])


def _braces(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.5 and ("{" in text or "}" in text):
            brace = rng.choice([c for c in "{}" if c in text])
            at = rng.choice([i for i, c in enumerate(text) if c == brace])
            text = text[:at] + text[at + 1 :]
        else:
            text = _insert(rng, text, rng.choice("{}"))
    return text


def _left_right(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    if "\\left" in text and rng.random() < 0.5:
        return text.replace("\\left", "", 1)
    if "\\right" in text and rng.random() < 0.5:
        return text.replace("\\right", "", 1)
    return _insert(
        rng, text, rng.choice(("\\left(", "\\right)", "\\left\\{", "\\right.", "\\left"))
    )


def _command(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    for _ in range(rng.randint(1, 3)):
        text = _insert(rng, text, rng.choice(COMMANDS))
    return text


def _controls(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    for _ in range(rng.randint(1, 4)):
        text = _insert(rng, text, rng.choice(_CONTROLS))
    return text


def _surrogates(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    return _insert(rng, text, rng.choice(_SURROGATES))


def _bidi(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    for _ in range(rng.randint(1, 6)):
        text = _insert(rng, text, rng.choice(_BIDI))
    return text


def macro_bomb(rng: random.Random) -> str:
    """A recursive or exponential macro definition and its use."""
    return rng.choice(
        (
            "\\def\\a{\\a\\a}\\a",
            "\\def\\a{\\a}\\a",
            "\\newcommand{\\x}{\\x x}\\x",
            "\\newcommand\\x[1]{\\x{#1#1}}\\x{y}",
            "\\def\\a{x}\\def\\b{\\a\\a\\a\\a}\\def\\c{\\b\\b\\b\\b}\\def\\d{\\c\\c\\c\\c}"
            "\\def\\e{\\d\\d\\d\\d}\\def\\f{\\e\\e\\e\\e}\\def\\g{\\f\\f\\f\\f}\\g\\g\\g",
            "\\renewcommand{\\frac}{\\frac\\frac}\\frac{1}{2}",
            "\\let\\a\\b\\let\\b\\a\\a",
            "\\def\\a#1{\\a{#1}{#1}}\\a{z}",
        )
    )


def _macro_bomb(rng: random.Random, text: str, pool: Sequence[str]) -> str:
    return macro_bomb(rng) + text


LATEX_MUTATIONS: dict[str, Callable[[random.Random, str, Sequence[str]], str]] = {
    "flip": _flip,
    "truncate": _truncate,
    "delete": _delete,
    "duplicate": _duplicate,
    "insert": _insert_other,
    "braces": _braces,
    "left-right": _left_right,
    "command": _command,
    "controls": _controls,
    "surrogates": _surrogates,
    "bidi": _bidi,
    "macro-bomb": _macro_bomb,
}


def mutate_latex(
    rng: random.Random, text: str, pool: Sequence[str], rounds: int = 0
) -> tuple[str, str]:
    """``text`` after 1-3 random mutations (``rounds`` when given); (text, "name+name")."""
    names = []
    for _ in range(rounds or rng.randint(1, 3)):
        name = rng.choice(tuple(LATEX_MUTATIONS))
        text = LATEX_MUTATIONS[name](rng, text, pool)
        names.append(name)
    return text, "+".join(names)


def deep_nesting(rng: random.Random, depth: int) -> str:
    """A ``depth``-deep LaTeX structure: braces, fractions, roots, scripts or ``\\left``."""
    kind = rng.choice(("braces", "frac", "sqrt", "scripts", "left", "env"))
    if kind == "braces":
        return "{" * depth + "x" + "}" * depth
    if kind == "frac":
        return "\\frac{" * depth + "1" + "}{2}" * depth
    if kind == "sqrt":
        return "\\sqrt{" * depth + "x" + "}" * depth
    if kind == "scripts":
        return "x^{" * depth + "y" + "}" * depth
    if kind == "left":
        return "\\left(" * depth + "x" + "\\right)" * depth
    return "\\begin{matrix}" * depth + "x" + "\\end{matrix}" * depth


def huge_latex(rng: random.Random, chars: int, pool: Sequence[str]) -> str:
    """About ``chars`` characters of real equations joined by ``+``."""
    pieces: list[str] = []
    size = 0
    while size < chars:
        piece = rng.choice(pool) if pool else "x+y"
        pieces.append(piece)
        size += len(piece) + 1
    return "+".join(pieces)


def _bytes_flip(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data or b" ")
    for _ in range(rng.randint(1, 8)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def _bytes_truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def _bytes_delete(rng: random.Random, data: bytes) -> bytes:
    start = rng.randrange(len(data) + 1)
    return data[:start] + data[start + rng.randint(1, 256) :]


def _bytes_duplicate(rng: random.Random, data: bytes) -> bytes:
    start = rng.randrange(len(data) + 1)
    end = min(len(data), start + rng.randint(1, 512))
    return data[:end] + data[start:end] * rng.randint(1, 4) + data[end:]


def _bytes_invalid(rng: random.Random, data: bytes) -> bytes:
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data) + 1)
        data = data[:at] + rng.choice(_INVALID_UTF8) + data[at:]
    return data


def _bytes_nul(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + b"\x00" * rng.randint(1, 16) + data[at:]


BYTE_MUTATIONS: dict[str, Callable[[random.Random, bytes], bytes]] = {
    "flip": _bytes_flip,
    "truncate": _bytes_truncate,
    "delete": _bytes_delete,
    "duplicate": _bytes_duplicate,
    "invalid-utf8": _bytes_invalid,
    "nul": _bytes_nul,
}


def mutate_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """``data`` after 1-3 byte mutations; (data, "name+name")."""
    names = []
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(tuple(BYTE_MUTATIONS))
        data = BYTE_MUTATIONS[name](rng, data)
        names.append(name)
    return data, "+".join(names)
