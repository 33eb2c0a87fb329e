"""User macros of a LaTeX document: find the definitions, expand them the way TeX does.

Definitions (found and parsed by :mod:`mathsearch.indexer.latex_definitions`, re-exported here):
``\\newcommand``/``\\renewcommand``/``\\providecommand`` (name with or without braces, ``[n]``
parameters, ``[default]`` for an optional first one), ``\\def`` and friends with undelimited or
delimited parameters (``\\def\\pair(#1,#2){..}``), ``\\DeclareMathOperator(*)`` (as
``\\operatorname(*){..}``), ``\\let\\a\\b`` (alias) and ``\\(re)newenvironment``.

Expansion reads arguments as TeX does (a brace group without its braces, or one token; spaces
before an argument and after a control word skipped) and rescans every replacement. Expansions
are counted and the output length tracked: past either limit :class:`LimitExceeded` (reason
``macro-expansion-limit``) is raised, so ``\\def\\a{\\a\\a}`` ends instead of looping.
:func:`environment_shorthands` picks the macros that open or close an environment or display
(arXiv's ``\\be .. \\ee``, ``\\bea .. \\eea``) for a first pass over the whole document.

Example::

    table = collect_macros(r"\\newcommand{\\R}{\\mathbb{R}} \\def\\half#1{\\frac{#1}{2}}")
    expand_macros(r"x \\in \\R, \\half{y}", table)  # 'x \\in \\mathbb{R}, \\frac{y}{2}'
"""

from __future__ import annotations

import re

from mathsearch.indexer.errors import LimitExceeded
from mathsearch.indexer.latex_definitions import (
    _INCOMPLETE,
    DEFINER,
    Definition,
    Environment,
    Macro,
    MacroTable,
    _argument,
    blank_definitions,
    bracket_end,
    collect_macros,
    environment_shorthands,
    find_definitions,
    group_end,
    parse_definition,
    skip_space,
)
from mathsearch.indexer.settings import IndexerSettings

__all__ = [
    "DEFINER",
    "EXPANSION_LIMIT",
    "Definition",
    "Environment",
    "Macro",
    "MacroTable",
    "blank_definitions",
    "bracket_end",
    "collect_macros",
    "environment_shorthands",
    "expand",
    "expand_macros",
    "find_definitions",
    "group_end",
    "parse_definition",
    "skip_space",
    "substitute",
]

#: Reason code of :class:`LimitExceeded` raised by the expander.
EXPANSION_LIMIT = "macro-expansion-limit"

_PARAM = re.compile(r"#(#|[1-9])")
_WORD_TAIL = re.compile(r"(?<!\\)(?:\\\\)*\\[A-Za-z@]+\Z")


def _delimited(text: str, pos: int, delimiter: str) -> tuple[str, int] | object:
    """The text up to ``delimiter`` outside braces (one outer brace pair removed)."""
    depth, index = 0, pos
    while index < len(text):
        char = text[index]
        if depth == 0 and text.startswith(delimiter, index):
            arg = text[pos:index].strip()
            if arg.startswith("{") and group_end(arg, 0) == len(arg):
                arg = arg[1:-1]
            return arg, index + len(delimiter)
        if char == "\\":
            index += 2
            continue
        depth += 1 if char == "{" else -1 if char == "}" else 0
        if depth < 0:
            return None
        index += 1
    return _INCOMPLETE


def _join(left: str, right: str) -> str:
    """Concatenate so that a control word at the end of ``left`` stays one token."""
    if right[:1].isalpha() and left[-1:].isalpha() and _WORD_TAIL.search(left[-80:]):
        return f"{left} {right}"
    return left + right


def substitute(body: str, args: list[str]) -> str:
    """``body`` with ``#n`` replaced by ``args[n-1]`` and ``##`` by ``#``."""
    if "#" not in body:
        return body
    result, last = "", 0
    for match in _PARAM.finditer(body):
        token = match.group(1)
        index = 0 if token == "#" else int(token)
        value = "#" if token == "#" else args[index - 1] if index <= len(args) else match.group()
        result = _join(_join(result, body[last : match.start()]), value)
        last = match.end()
    return _join(result, body[last:])


def _call(table: MacroTable, text: str, match: re.Match[str]) -> tuple[str, int] | object | None:
    """(replacement, end) for the macro call at ``match``; ``_INCOMPLETE`` or None (no match)."""
    pos = match.end()
    groups = match.groupdict()
    if groups.get("env") is not None:
        env = table.environments[groups["env"]]
        if groups["be"] == "end":
            return env.end, pos
        macro = Macro(env.name, env.nargs, env.begin, env.default)
    else:
        macro = table.macros[groups.get("word") or groups["symbol"]]
        if groups.get("word"):
            pos = skip_space(text, pos)
    if macro.prefix:
        if not text.startswith(macro.prefix, pos):
            return _INCOMPLETE if macro.prefix.startswith(text[pos:]) else None
        pos += len(macro.prefix)
    args: list[str] = []
    for index in range(macro.nargs):
        delimiter = macro.delimiters[index] if index < len(macro.delimiters) else ""
        if index == 0 and macro.default is not None:
            start = skip_space(text, pos)
            if start >= len(text):
                return _INCOMPLETE
            if text[start] != "[":
                args.append(macro.default)
                continue
            end = bracket_end(text, start)
            if end < 0:
                return _INCOMPLETE
            args.append(text[start + 1 : end - 1])
            pos = end
            continue
        parsed = _delimited(text, pos, delimiter) if delimiter else _argument(text, pos)
        if not isinstance(parsed, tuple):
            return parsed
        args.append(parsed[0])
        pos = parsed[1]
    return substitute(macro.body, args), pos


def expand(text: str, table: MacroTable, *, max_expansions: int, max_chars: int) -> str:
    """``text`` with every macro of ``table`` expanded (see the module docstring).

    Raises :class:`LimitExceeded` (reason ``macro-expansion-limit``) past ``max_expansions``
    expansions or when the expanded text would exceed ``max_chars`` characters.
    """
    trigger = table.trigger()
    if trigger is None or "\\" not in text:
        return text
    out: list[str] = []
    frames: list[list] = [[text, 0]]  # pending inputs, innermost last: [string, position]
    count, total = 0, len(text)

    def emit(chunk: str) -> None:
        if chunk:
            if out and chunk[0].isalpha() and _WORD_TAIL.search(out[-1][-80:]):
                out.append(" ")
            out.append(chunk)

    while frames:
        frame = frames[-1]
        source, pos = frame
        match = trigger.search(source, pos)
        if match is None:
            emit(source[pos:])
            frames.pop()
            continue
        emit(source[pos : match.start()])
        if match.group("pair") is not None:
            emit("\\\\")
            frame[1] = match.end()
            continue
        parsed = _call(table, source, match)
        if parsed is _INCOMPLETE:
            while len(frames) > 1 and frames[-2][1] >= len(frames[-2][0]):
                del frames[-2]
            if len(frames) > 1:  # the arguments continue in the enclosing input: merge
                lower = frames[-2]
                rest = source[match.start() :]
                cut = min(len(lower[0]), lower[1] + max(4096, 2 * len(rest)))
                while cut < len(lower[0]) and (
                    lower[0][cut].isalpha() or lower[0][cut - 1] == "\\"
                ):
                    cut += 1
                frames[-1] = [_join(rest, lower[0][lower[1] : cut]), 0]
                lower[1] = cut
                continue
            parsed = None
        if not isinstance(parsed, tuple):
            emit(match.group())
            frame[1] = match.end()
            continue
        replacement, end = parsed
        count += 1
        total += len(replacement) - (end - match.start())
        if count > max_expansions:
            raise LimitExceeded(f"more than {max_expansions} macro expansions", EXPANSION_LIMIT)
        if total > max_chars:
            raise LimitExceeded(f"macro expansion beyond {max_chars} characters", EXPANSION_LIMIT)
        frame[1] = end
        if end >= len(source):
            frames.pop()
        if replacement:
            frames.append([replacement, 0])
    return "".join(out)


def expand_macros(latex: str, table: MacroTable, settings: IndexerSettings | None = None) -> str:
    """Expand the user macros of ``table`` in one equation body, within ``settings`` limits."""
    settings = settings or IndexerSettings()
    return expand(
        latex,
        table,
        max_expansions=settings.max_macro_expansions,
        max_chars=settings.max_equation_chars,
    )
