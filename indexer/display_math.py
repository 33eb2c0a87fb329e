"""Display math of a LaTeX text: find the environments, split aligned rows, clean the bodies.

Found: ``equation``, ``align``, ``gather``, ``multline``, ``eqnarray``, ``flalign``, ``alignat``
(its ``{n}`` argument dropped), their starred forms, ``displaymath``, ``\\[..\\]`` and
``$$..$$``. Inline ``$..$`` is skipped (never taken for the start of a ``$$``), as are comments,
``verbatim``-like environments, ``\\verb`` and the bodies of macro definitions (so
``\\newcommand{\\be}{\\begin{equation}}`` is not an equation). ``$..$``, ``$$..$$`` and
``\\[..\\]`` end at a blank line, as TeX would complain there; an environment without its end
is skipped (:func:`iter_displays` can list what it skipped, which the LaTeX reader records as
``unterminated-environment`` failures).

Rows: ``align``, ``gather``, ``eqnarray``, ``flalign`` and ``alignat`` hold one equation per row
(``\\\\`` at the top level; rows inside braces or nested environments such as ``aligned``,
``array``, ``cases``, ``split`` or ``matrix`` stay together). Top-level ``&`` become spaces,
empty rows are dropped, and a row that only continues the previous one (empty first column and
a leading ``+``, ``-``, ``\\times``, .., or a previous row ending in such an operator) is merged
into it. ``multline`` is one equation over several lines; ``equation`` (also around ``split`` or
``aligned``), ``displaymath``, ``\\[..\\]`` and ``$$..$$`` are one equation each.

Cleaning removes ``%`` comments (not ``\\%``), ``\\label{..}``, ``\\tag{..}``, ``\\tag*{..}``,
``\\intertext{..}``, ``\\nonumber``, ``\\notag`` and plain TeX ``\\eqno(..)``, and collapses
white space; :func:`mask_comments` and :func:`mask_iffalse` hide comments and ``\\iffalse ..
\\fi`` blocks from the search while keeping offsets.

Example::

    found = find_display_math(text)
    spans = [(item.env, item.row, item.latex, text[item.start : item.end]) for item in found]
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass

from mathsearch.indexer.latex_macros import group_end, parse_definition

logger = logging.getLogger(__name__)

_BASE_ENVIRONMENTS = ("equation", "align", "gather", "multline", "eqnarray", "flalign", "alignat")
#: Environment names taken as display math (starred forms included).
DISPLAY_ENVIRONMENTS = frozenset(
    [*_BASE_ENVIRONMENTS, *(f"{name}*" for name in _BASE_ENVIRONMENTS), "displaymath"]
)
#: Environments whose top-level rows are separate equations.
_ROW_BASES = frozenset({"align", "gather", "eqnarray", "flalign", "alignat"})
ROW_ENVIRONMENTS = frozenset(
    name for name in DISPLAY_ENVIRONMENTS if name.rstrip("*") in _ROW_BASES
)
#: Environments whose content is not LaTeX to scan.
_SKIPPED_ENVIRONMENTS = frozenset(
    {"verbatim", "verbatim*", "Verbatim", "comment", "lstlisting", "minted", "alltt"}
)
_DISPLAY_NAMES = "|".join(re.escape(name) for name in sorted(DISPLAY_ENVIRONMENTS, key=len)[::-1])
_DISPLAY_BEGIN = rf"\\begin\s*\{{(?:{_DISPLAY_NAMES})\}}"
_TEXT = re.compile(
    r"\\\\|\\\$"
    r"|\\begin\s*\{(?P<env>[^{}\s]+)\}"
    r"|(?P<definer>\\(?:newcommand|renewcommand|providecommand|DeclareRobustCommand|def|gdef"
    r"|edef|xdef|let|DeclareMathOperator|newenvironment|renewenvironment)(?![A-Za-z@]))"
    r"|\\verb\*?(?P<verb>[^A-Za-z\s*])"
    r"|(?P<bracket>\\\[)|(?P<dollars>\$\$)|(?P<dollar>\$)"
)
_PAR = r"|(?P<par>\n[ \t]*\n)"
_CLOSE_BRACKET = re.compile(r"\\\\|(?P<close>\\\])" + _PAR + rf"|(?P<open>{_DISPLAY_BEGIN}|\\\[)")
_CLOSE_DOLLARS = re.compile(r"\\\\|\\\$|(?P<close>\$\$)" + _PAR + rf"|(?P<open>{_DISPLAY_BEGIN})")
_CLOSE_DOLLAR = re.compile(r"\\\\|\\\$|(?P<close>\$)" + _PAR + rf"|(?P<open>{_DISPLAY_BEGIN}|\\\[)")
# A possessive run of text that cannot change the row structure (plain text, control words,
# brace groups without nested braces or row breaks), then one structural token.
_ROW_TOKEN = re.compile(
    r"(?:\{(?:[^{}\\]|\\[^{}\\])*\}|[^{}\\&]+|\\(?!begin\s*\{|end\s*\{)[^\\{}&])*+"
    r"(?:(?P<open>\{|\\begin\s*\{[^{}]*\})|(?P<close>\}|\\end\s*\{[^{}]*\})"
    r"|(?P<sep>\\\\\*?)(?:\s*\[(?P<opt>[^\[\]{}]*)\])?|(?P<escape>\\[{}&])|(?P<amp>&)|(?P<eos>\Z))"
)
_LENGTH = re.compile(r"\s*[-+]?(?:\d*\.?\d+\s*(?:pt|mm|cm|in|ex|em|bp|pc|dd|cc|sp|mu)|\\\w+)\s*")
_CONDITIONAL = re.compile(r"\\\\|\\(?P<if>if(?!f(?![A-Za-z@])|thenelse)[A-Za-z@]*|fi)(?![A-Za-z@])")
_COMMENT = re.compile(r"\\.|%[^\n]*", re.DOTALL)
_REMOVED_WITH_ARG = re.compile(r"\\(?:label|tag\*?|intertext|shortintertext)\s*(?=\{)")
_REMOVED = re.compile(
    r"\\(?:nonumber|notag|displaybreak|allowdisplaybreaks|nopagebreak|pagebreak)"
    r"(?![A-Za-z@])(?:\s*\[\d\])?"
)
_EQNO = re.compile(r"\\l?eqno(?![A-Za-z@]).*", re.DOTALL)  # plain TeX numbers end a display
_SPACING = re.compile(
    r"\\(?:quad|qquad|hfill|[,;:!> ])(?![A-Za-z@])|\\hspace\*?\s*\{[^{}]*\}|~|\\\\|\{\s*\}|\s"
)
_LEADING_OPERATOR = re.compile(
    r"(?:[+\-]|\\(?:times|cdot|cdots|ldots|dots|pm|mp|otimes|oplus|circ|wedge)(?![A-Za-z]))"
)
_OPENING = re.compile(r"\\(?:left|[bB]igg?l)(?![A-Za-z@])")
_CLOSING = re.compile(r"\\(?:right|[bB]igg?r)(?![A-Za-z@])")
_TRAILING_OPERATOR = re.compile(
    r"(?:[+\-]|\\(?:times|cdot|cdots|ldots|dots|pm|mp|otimes|oplus|circ|wedge))\Z"
)


@dataclass(frozen=True)
class RawDisplay:
    """One display as written: ``env`` (``\\[`` or ``$$`` for the delimiters), the span of the
    whole display in the text, and the body between its delimiters."""

    env: str
    start: int
    end: int
    body: str


@dataclass(frozen=True)
class DisplayMath:
    """One equation: its environment, cleaned LaTeX, the span of the enclosing display in the
    text (for context windows) and its row within that display (0 when not split)."""

    env: str
    latex: str
    start: int
    end: int
    row: int = 0


def mask_comments(text: str) -> str:
    """``text`` with every comment's text blanked after its ``%`` (offsets are kept)."""
    if "%" not in text:
        return text

    def blank(match: re.Match[str]) -> str:
        token = match.group()
        return token if token[0] == "\\" else "%" + " " * (len(token) - 1)

    return _COMMENT.sub(blank, text)


def mask_iffalse(text: str) -> str:
    """``text`` without the content of ``\\iffalse .. \\fi`` blocks (nested ``\\if``s counted)."""
    pieces: list[str] = []
    last = pos = 0
    while (start := text.find("\\iffalse", pos)) >= 0:
        depth, end = 0, len(text)
        for match in _CONDITIONAL.finditer(text, start):
            token = match.group("if")
            depth += 0 if token is None else -1 if token == "fi" else 1
            if depth == 0:
                end = match.end()
                break
        pieces.extend((text[last:start], re.sub(r"[^\n]", " ", text[start:end])))
        last = pos = end
    pieces.append(text[last:])
    return "".join(pieces)


def _close(pattern: re.Pattern[str], text: str, pos: int, end: int) -> re.Match[str] | None:
    """The closing match of ``pattern`` after ``pos``; None at a blank line or a new display."""
    while (match := pattern.search(text, pos, end)) is not None:
        if match.group("close") is not None:
            return match
        if match.group("par") is not None or match.group("open") is not None:
            return None
        pos = match.end()
    return None


def iter_displays(
    text: str,
    start: int = 0,
    end: int | None = None,
    *,
    unterminated: list[RawDisplay] | None = None,
) -> Iterator[RawDisplay]:
    """The display math of ``text[start:end]`` in order (comments should be masked first).

    A display environment without its ``\\end`` (none, or another display opens first) and a
    ``\\[`` or ``$$`` not closed before a blank line are skipped; with ``unterminated`` each is
    appended there (``end`` is where its opening ends, ``body`` the next 200 characters).
    """
    end = len(text) if end is None else end
    pos = start

    def skipped(env: str, at: int, after: int) -> None:
        if unterminated is not None:
            unterminated.append(RawDisplay(env, at, after, text[after : min(end, after + 200)]))

    while (match := _TEXT.search(text, pos, end)) is not None:
        pos = match.end()
        env = match.group("env")
        if env in DISPLAY_ENVIRONMENTS:
            closing = re.compile(rf"\\end\s*\{{{re.escape(env)}\}}").search(text, pos, end)
            if closing is None or re.search(_DISPLAY_BEGIN, text[pos : closing.start()]):
                logger.debug("skipping \\begin{%s} without its end at %d", env, match.start())
                skipped(env, match.start(), pos)
                continue
            body = text[pos : closing.start()]
            if env.startswith("alignat"):
                body = re.sub(r"\A\s*\{[^{}]*\}", "", body)
            yield RawDisplay(env, match.start(), closing.end(), body)
            pos = closing.end()
        elif env in _SKIPPED_ENVIRONMENTS:
            closing = re.compile(rf"\\end\s*\{{{re.escape(env)}\}}").search(text, pos, end)
            pos = end if closing is None else closing.end()
        elif match.group("definer"):
            definition = parse_definition(text, match.start())
            pos = definition.end if definition is not None else pos
        elif match.group("verb"):
            closing_at = text.find(match.group("verb"), pos, end)
            newline = text.find("\n", pos, end)
            if closing_at >= 0 and (newline < 0 or closing_at < newline):
                pos = closing_at + 1
        elif match.group("bracket") or match.group("dollars"):
            pattern = _CLOSE_BRACKET if match.group("bracket") else _CLOSE_DOLLARS
            closing = _close(pattern, text, pos, end)
            delimiter = "\\[" if match.group("bracket") else "$$"
            if closing is None:
                skipped(delimiter, match.start(), pos)
                continue
            yield RawDisplay(delimiter, match.start(), closing.end(), text[pos : closing.start()])
            pos = closing.end()
        elif match.group("dollar"):
            closing = _close(_CLOSE_DOLLAR, text, pos, end)
            pos = closing.end() if closing is not None else pos


def clean_latex(latex: str) -> str:
    """``latex`` without comments, labels, tags, ``\\nonumber``/``\\notag``; spaces collapsed."""
    if "%" in latex:
        latex = _COMMENT.sub(lambda m: m.group() if m.group()[0] == "\\" else " ", latex)
    while (match := _REMOVED_WITH_ARG.search(latex)) is not None:
        end = group_end(latex, match.end())
        end = len(latex) if end < 0 else end
        latex = f"{latex[: match.start()]} {latex[end:]}"
    latex = _REMOVED.sub(" ", latex)
    latex = _EQNO.sub(" ", latex)
    latex = " ".join(latex.split())
    while latex.endswith("\\\\") and not latex.endswith("\\\\\\"):
        latex = latex[:-2].rstrip()
    return latex


def is_blank(latex: str) -> bool:
    """True when ``latex`` holds nothing but spacing."""
    return not _SPACING.sub("", latex)


def _top_level_rows(body: str, split_rows: bool) -> list[tuple[str | None, str]]:
    """(first column or None without ``&``, row with top-level ``&`` as spaces) per row."""
    rows: list[tuple[str | None, str]] = []
    depth, last, pieces, first_column = 0, 0, [], None
    for match in _ROW_TOKEN.finditer(body):
        kind = match.lastgroup
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth = max(depth - 1, 0)
        elif depth or kind == "escape":
            continue
        elif kind == "eos":
            break
        elif kind == "amp":
            pieces.append(body[last : match.start(kind)])
            first_column = "".join(pieces) if first_column is None else first_column
            pieces.append(" ")
            last = match.end()
        else:  # a row separator, with or without [opt]
            opt = match.group("opt")
            sep_end = match.end() if opt is None or _LENGTH.fullmatch(opt) else match.end("sep")
            pieces.append(body[last : match.start("sep")])
            if not split_rows:
                pieces.append(" ")
                last = sep_end
                continue
            rows.append((first_column, "".join(pieces)))
            pieces, first_column, last = [], None, sep_end
    pieces.append(body[last:])
    rows.append((first_column, "".join(pieces)))
    return rows


def split_display(env: str, body: str, *, merge_continuations: bool = True) -> list[str]:
    """The cleaned equations of one display body (one per row for row environments)."""
    if env not in ROW_ENVIRONMENTS:
        if env.rstrip("*") == "multline":
            body = _top_level_rows(body, split_rows=False)[0][1]
        latex = clean_latex(body)
        return [] if is_blank(latex) else [latex]
    equations: list[str] = []
    for first_column, row in _top_level_rows(body, split_rows=True):
        latex = clean_latex(row)
        if is_blank(latex):
            continue
        if merge_continuations and equations and _continues(equations[-1], first_column, latex):
            equations[-1] = f"{equations[-1]} {latex}"
        else:
            equations.append(latex)
    return equations


def _continues(previous: str, first_column: str | None, latex: str) -> bool:
    """Whether a row only continues the equation of the previous one.

    It does when the previous row leaves a ``\\left``/``\\bigl`` open, or when the row starts
    with a binary operator (or follows a row ending in one) and has an empty first column
    (``&&+ c``), or has no column at all and no ``=`` (``- c\\Bigr]``).
    """
    opened = len(_OPENING.findall(previous)) - len(_CLOSING.findall(previous))
    if opened > 0:
        return True
    operator = _LEADING_OPERATOR.match(_SPACING.sub("", latex[:40])) is not None
    if first_column is not None and is_blank(clean_latex(first_column)):
        return operator or _TRAILING_OPERATOR.search(previous) is not None
    return operator and first_column is None and "=" not in latex


def find_display_math(
    text: str, *, merge_continuations: bool = True, start: int = 0, end: int | None = None
) -> list[DisplayMath]:
    """Every equation of the display math in ``text`` (comments and ``\\iffalse`` masked here)."""
    masked = mask_iffalse(mask_comments(text))
    found: list[DisplayMath] = []
    for raw in iter_displays(masked, start, end):
        rows = split_display(raw.env, raw.body, merge_continuations=merge_continuations)
        found.extend(
            DisplayMath(raw.env, latex, raw.start, raw.end, row) for row, latex in enumerate(rows)
        )
    return found
