"""Math tokens of a LaTeX string, the text that BM25 matches (first version, for the demo)."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[A-Za-z]|\d+(?:\.\d+)?|[^\s{}]")
_LAYOUT = frozenset(
    [
        r"\left",
        r"\right",
        r"\,",
        r"\;",
        r"\:",
        r"\!",
        r"\quad",
        r"\qquad",
        r"\big",
        r"\Big",
        r"\bigg",
        r"\Bigg",
        r"\nonumber",
        r"\displaystyle",
        r"\cr",
        r"\\",
        r"\bf",
        r"\rm",
        r"\it",
        r"\mathrm",
        r"\mathbf",
        r"\label",
    ]
)


def math_tokens(latex: str) -> list[str]:
    r"""Commands, single letters, numbers and symbols, without braces and pure layout commands.

    >>> math_tokens(r"\frac{1}{2} m v^2")
    ['\\frac', '1', '2', 'm', 'v', '^', '2']
    """
    return [tok for tok in _TOKEN.findall(latex) if tok not in _LAYOUT]
