"""Display-math LaTeX rewritten into lines matplotlib mathtext can draw (for
:mod:`mathsearch.indexer.bitmap`).

mathtext is its own TeX subset and no TeX is installed, so :func:`to_mathtext` rewrites what it
lacks: ``\\over``/``\\choose``/``\\atop``, ``\\mbox``/``\\hbox``/``\\textrm``,
``\\big``-sized delimiters, ``\\displaystyle``, ``\\limits``, ``\\label``, ``\\nonumber``,
``\\hspace``, ``\\tfrac``, ``\\stackrel``, unbraced arguments (``\\frac12``), ``\\ge``/``\\le``
...; arrays and matrices become ``\\substack`` rows with cells apart by ``\\quad`` (no column
alignment); top-level rows (``\\\\``, ``split``, ``eqnarray``) become one line each. An
environment without its ``\\end`` raises :class:`RenderError` (reason ``syntax``), the error of
the render stage (re-exported by :mod:`mathsearch.indexer.bitmap`).
"""

from __future__ import annotations

import re

from mathsearch.indexer.errors import IndexerError


class RenderError(IndexerError):
    """An equation could not be rendered; ``reason`` is the failure code."""

    reason = "render-error"


_CMD = r"(?![a-zA-Z])"
_DIM = r"\s*\{?\s*-?[\d.]+\s*(?:true)?(?:pt|em|ex|mu|cm|mm|in|bp|sp|pc)\s*\}?"
_DROP = re.compile(
    r"\\(?:displaystyle|textstyle|scriptstyle|scriptscriptstyle|limits|nolimits|nonumber|notag"
    r"|noindent|hfill|hfil|protect|allowbreak|relax|boldmath|unboldmath|hline|nulldelimiterspace"
    r"|(?:[bB]igg?)[lrm]?)" + _CMD
)
_DROP_WITH_ARG = re.compile(r"\\(?:label|tag\*?|vspace\*?|eqlabel|color|footnote)\s*\{[^{}]*\}")
_SPACING = re.compile(r"\\(?:hskip|kern|mkern|mskip|vskip|hspace\*?)" + _DIM)
#: commands mathtext lacks -> a drawable equivalent ("names -> replacement | ...")
_RENAME_TABLE = r"""
tfrac cfrac -> \frac | stackrel -> \overset | Bbb mathbbm -> \mathbb | bm -> \boldsymbol
bold textbf -> \mathbf | sl em textit -> \it | textsf -> \mathsf | texttt -> \mathtt | cr -> \\
Box square -> □ | ge -> \geq | le -> \leq | lnot -> \neg | iff -> \Leftrightarrow | sp -> ^
implies -> \Rightarrow | land -> \wedge | lor -> \vee | dotsb dotsm dotsi -> \cdots | sb -> _
dotsc dotso -> \ldots | bmod mod pmod -> \;\mathrm{mod}\; | operatorname* -> \operatorname
"""
_RENAME = {
    name: replacement
    for pair in re.split(r"\s*\|\s*|\n", _RENAME_TABLE.strip())
    for names, replacement in [pair.split(" -> ")]
    for name in names.split()
}
_RENAME_RE = re.compile(
    r"\\(" + "|".join(sorted(map(re.escape, _RENAME), key=len)[::-1]) + r")" + _CMD
)
_UNWRAP = re.compile(
    r"\\(?:mathop|mathord|mathrel|mathbin|mathpunct|mathinner|lefteqn|rlap|llap|ensuremath"
    r"|underbrace|overbrace|boxed|fbox|vphantom|hphantom|textcolor\s*\{[^{}]*\})" + _CMD + r"\s*"
)
_TEXT = re.compile(r"\\(?:mbox|hbox|textrm|textnormal|textup|text|makebox)" + _CMD + r"\s*")
_INFIX = {"over": "\\frac{%s}{%s}", "choose": "\\binom{%s}{%s}", "atop": "\\substack{%s\\\\%s}"}
_INFIX_RE = re.compile(r"\\(over|choose|atop)" + _CMD)
_PLAIN_ENV = re.compile(r"\\(eqalignno|eqalign|matrix|pmatrix|cases|displaylines)\s*\{")
_PLAIN_NAMES = {"eqalignno": "aligned", "eqalign": "aligned", "displaylines": "gathered"}
_ENV = re.compile(r"\\begin\s*\{(\w+\*?)\}")
_WRAPPERS = {
    "pmatrix": ("\\left(", "\\right)"),
    "bmatrix": ("\\left[", "\\right]"),
    "vmatrix": ("\\left|", "\\right|"),
    "Vmatrix": ("\\left\\|", "\\right\\|"),
    "cases": ("\\left\\{", "\\right."),
}
#: commands whose arguments mathtext wants in braces (``\\frac12`` -> ``\\frac{1}{2}``)
_ONE_ARGUMENT = (
    "sqrt overline underline hat bar tilde vec dot ddot widehat widetilde check breve acute grave"
    " mathring mathrm mathbf mathit mathcal mathbb mathsf mathtt mathfrak mathscr boldsymbol"
    " operatorname overrightarrow overleftarrow phantom"
)
_TWO_ARGUMENTS = "frac dfrac binom overset underset"
_ARITY = dict.fromkeys(_ONE_ARGUMENT.split(), 1) | dict.fromkeys(_TWO_ARGUMENTS.split(), 2)
_ARG_CMD = re.compile(r"\\(" + "|".join(sorted(_ARITY, key=len)[::-1]) + r")" + _CMD)
_TOKEN = re.compile(r"\s*(\\[a-zA-Z]+|\\.|[^\s{}\\])")


def _group_end(text: str, start: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``start`` (``len(text)`` when unbalanced)."""
    depth, index = 0, start
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        depth += (char == "{") - (char == "}")
        if depth == 0:
            return index
        index += 1
    return len(text)


def _split_top(text: str, separator: str) -> list[str]:
    """Split at ``separator`` outside braces and outside ``\\begin..\\end`` environments."""
    parts, depth, env, last, index = [], 0, 0, 0, 0
    while index < len(text):
        if text.startswith(separator, index) and depth == 0 and env == 0:
            parts.append(text[last:index])
            index += len(separator)
            last = index
            continue
        char = text[index]
        if char == "\\":
            env += text.startswith("\\begin", index) - text.startswith("\\end", index)
            index += 2
            continue
        depth += (char == "{") - (char == "}")
        index += 1
    parts.append(text[last:])
    return parts


def _take_argument(text: str, pos: int) -> tuple[str, int]:
    """One macro argument at ``pos`` as a braced group (a command keeps its own arguments)."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos < len(text) and text[pos] == "{":
        end = _group_end(text, pos)
        return "{" + _brace_args(text[pos + 1 : end]) + "}", end + 1
    token = _TOKEN.match(text, pos)
    if token is None:
        return "", pos
    command = _ARG_CMD.match(text, token.start(1))
    if command is not None:
        inner, pos = _braced_command(text, command)
        return "{" + inner + "}", pos
    return "{" + token.group(1) + "}", token.end()


def _braced_command(text: str, match: re.Match[str]) -> tuple[str, int]:
    out, pos = [match.group(0)], match.end()
    if match.group(1) == "sqrt" and text[pos:].lstrip().startswith("["):
        close = text.find("]", pos)
        close = len(text) - 1 if close < 0 else close
        out.append(text[pos : close + 1])
        pos = close + 1
    for _ in range(_ARITY[match.group(1)]):
        argument, pos = _take_argument(text, pos)
        out.append(argument)
    return "".join(out), pos


def _brace_args(text: str) -> str:
    """Put the arguments of :data:`_ARITY` commands in braces (mathtext requires them)."""
    out, pos = [], 0
    while match := _ARG_CMD.search(text, pos):
        out.append(text[pos : match.start()])
        command, pos = _braced_command(text, match)
        out.append(command)
    out.append(text[pos:])
    return "".join(out)


def _rewrite_text(text: str) -> str:
    """``\\mbox{a $x$ b}`` -> ``{\\text{a }{x}\\text{ b}}``; other text boxes likewise."""
    pos = 0
    while match := _TEXT.search(text, pos):
        start = match.end()
        if start >= len(text) or text[start] != "{":
            text = text[: match.start()] + text[match.end() :]
            pos = match.start()
            continue
        end = _group_end(text, start)
        pieces = text[start + 1 : end].split("$")
        out = "".join(
            (f"\\text{{{piece}}}" if piece.strip() else " ") if i % 2 == 0 else f"{{{piece}}}"
            for i, piece in enumerate(pieces)
        )
        text = text[: match.start()] + "{" + out + "}" + text[end + 1 :]
        pos = match.start() + len(out) + 2
    return text


def _rewrite_infix(text: str) -> str:
    """TeX infix fractions ``{a \\over b}`` -> ``\\frac{a}{b}`` in the innermost group."""
    while match := _INFIX_RE.search(text):
        stack, index = [], 0
        while index < match.start():
            if text[index] == "\\":
                index += 2
                continue
            if text[index] == "{":
                stack.append(index)
            elif text[index] == "}" and stack:
                stack.pop()
            index += 1
        start = stack[-1] + 1 if stack else 0
        end = _group_end(text, start - 1) if stack else len(text)
        numerator, denominator = text[start : match.start()], text[match.end() : end]
        text = text[:start] + _INFIX[match.group(1)] % (numerator, denominator) + text[end:]
    return text


def _rewrite_plain(text: str) -> str:
    """Plain-TeX ``\\matrix{..}``, ``\\eqalign{..}``, ... -> ``\\begin{..}..\\end{..}``."""
    while match := _PLAIN_ENV.search(text):
        name = _PLAIN_NAMES.get(match.group(1), match.group(1))
        end = _group_end(text, match.end() - 1)
        body = text[match.end() : end]
        text = f"{text[: match.start()]}\\begin{{{name}}}{body}\\end{{{name}}}{text[end + 1 :]}"
    return text


def _environment_end(text: str, name: str, pos: int) -> re.Match[str] | None:
    depth = 1
    pattern = r"\\(begin|end)\s*\{" + re.escape(name) + r"\}"
    for tag in re.finditer(pattern, text[pos:]):
        depth += 1 if tag.group(1) == "begin" else -1
        if depth == 0:
            return re.compile(re.escape(tag.group(0))).search(text, pos + tag.start())
    return None


def _rewrite_environments(text: str) -> str:
    """Arrays and matrices -> ``\\substack`` columns; ``&`` elsewhere -> a space."""
    while match := _ENV.search(text):
        name = match.group(1)
        body_start = match.end()
        if (
            name.startswith(("array", "alignedat", "tabular"))
            and text[body_start:].lstrip()[:1] == "{"
        ):
            body_start = _group_end(text, text.index("{", body_start)) + 1
        closing = _environment_end(text, name, body_start)
        if closing is None:
            raise RenderError(f"\\begin{{{name}}} without \\end", "syntax")
        body = _rewrite_environments(text[body_start : closing.start()])
        rows = [r for r in _split_top(body, "\\\\") if r.strip()]
        cells = ["\\hspace{0}" + "\\quad ".join(_split_top(r, "&")) for r in rows]
        inner = "\\substack{" + "\\\\".join(cells) + "}" if len(cells) > 1 else "".join(cells)
        left, right = _WRAPPERS.get(name.rstrip("*"), ("{", "}"))
        text = text[: match.start()] + left + inner + right + text[closing.end() :]
    return text


def _balance(line: str) -> str:
    """Close ``\\left``/``\\right`` pairs cut by a line break with null delimiters."""
    opened = len(re.findall(r"\\left" + _CMD, line))
    closed = len(re.findall(r"\\right" + _CMD, line))
    return "\\left." * max(0, closed - opened) + line + "\\right." * max(0, opened - closed)


def to_mathtext(latex: str) -> list[str]:
    """Rewrite display-math LaTeX into mathtext-drawable lines (one string per output row)."""
    text = re.sub(r"(?<!\\)%[^\n]*", "", latex).strip()
    text = re.sub(r"^(\$\$?|\\\[)|(\$\$?|\\\])$", "", text).strip()
    text = re.split(r"\\(?:eqno|leqno)" + _CMD, text)[0]
    text = _DROP_WITH_ARG.sub("", text)
    text = _SPACING.sub(r"\\ ", text)
    text = _DROP.sub("", text)
    text = _RENAME_RE.sub(lambda m: _RENAME[m.group(1)], text)
    text = re.sub(r"\\\\\*?\s*\[[^\]]*\]", r"\\\\", text)
    text = _rewrite_plain(_rewrite_text(_UNWRAP.sub("", text)))
    top = re.fullmatch(
        r"\s*\\begin\{(split|aligned|gathered|multline\*?|align\*?|eqnarray\*?)\}"
        r"(.*)\\end\{\1\}\s*",
        text,
        re.S,
    )
    if top:
        text = top.group(2)
    lines = []
    for row in _split_top(text, "\\\\"):
        line = _brace_args(_rewrite_infix(_rewrite_environments(row)).replace("&", " "))
        line = re.sub(r"\s+", " ", re.sub(r"(?<!\\)\\(\s)", "~", line)).strip().rstrip("\\")
        if line:
            lines.append(_balance(line))
    return lines
