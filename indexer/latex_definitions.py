"""User macro definitions of a LaTeX document: find and parse them
(:mod:`mathsearch.indexer.latex_macros`
expands them).

Definitions: ``\\newcommand``/``\\renewcommand``/``\\providecommand`` (name with or without
braces, ``[n]`` parameters, ``[default]`` for an optional first one), ``\\def`` and friends with
undelimited or delimited parameters (``\\def\\pair(#1,#2){..}``), ``\\DeclareMathOperator(*)``
(as ``\\operatorname(*){..}``), ``\\let\\a\\b`` (alias) and ``\\(re)newenvironment``; a
definition that cannot be parsed is ignored. :class:`MacroTable` holds the result (later
definitions win, as in TeX). :func:`environment_shorthands` picks the macros that open or close an
environment or display (arXiv's ``\\be .. \\ee``, ``\\bea .. \\eea``) for a first pass over the
whole document. The scanners :func:`skip_space`, :func:`group_end` and :func:`bracket_end` read
TeX groups the same way for the definitions and for the expander.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import cast

logger = logging.getLogger(__name__)

_DEFINERS = (
    "newcommand|renewcommand|providecommand|DeclareRobustCommand|def|gdef|edef|xdef|let"
    "|DeclareMathOperator|newenvironment|renewenvironment"
)
#: An escaped backslash pair (skipped) or a defining command.
DEFINER = re.compile(r"\\\\|\\(?P<cmd>" + _DEFINERS + r")(?![A-Za-z@])")
_SPACE = re.compile(r"[ \t\r\n]*")
_CS = re.compile(r"\\(?:[A-Za-z@]+|.)", re.DOTALL)
_BRACE = re.compile(r"\\[{}\\]|[{}]")
_BRACKET = re.compile(r"\\[{}\\\]]|[{}\]]")
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_MARKER = re.compile(r"\\\\|\\(?:begin|end)(?![A-Za-z@])|\\\[|\\\]|\$\$")
_INCOMPLETE = object()  # sentinel: the input ended before the macro's arguments did


class _MalformedError(Exception):
    """Internal: a definition that cannot be parsed (it is then ignored)."""


@dataclass(frozen=True)
class Macro:
    """A macro: ``body`` holds ``#1``..``#9``; ``default`` makes the first parameter optional.

    ``prefix`` and ``delimiters`` describe ``\\def`` parameter text: the literal text that must
    follow the name, and per parameter the text that ends it ("" = undelimited).
    """

    name: str
    nargs: int = 0
    body: str = ""
    default: str | None = None
    prefix: str = ""
    delimiters: tuple[str, ...] = ()


@dataclass(frozen=True)
class Environment:
    """A ``\\newenvironment``: ``\\begin{name}`` becomes ``begin``, ``\\end{name}`` ``end``."""

    name: str
    nargs: int = 0
    default: str | None = None
    begin: str = ""
    end: str = ""


@dataclass(frozen=True)
class Definition:
    """One definition found in a text, with its span; ``alias`` names the target of ``\\let``."""

    start: int
    end: int
    command: str
    item: Macro | Environment
    alias: str | None = None


@dataclass
class MacroTable:
    """The macros and environments of a document (later definitions win, as in TeX)."""

    macros: dict[str, Macro] = field(default_factory=dict)
    environments: dict[str, Environment] = field(default_factory=dict)

    def add(self, definition: Definition) -> None:
        item = definition.item
        if isinstance(item, Environment):
            self.environments[item.name] = item
            return
        if definition.command == "providecommand" and item.name in self.macros:
            return
        if definition.alias is not None and definition.alias in self.macros:
            target = self.macros[definition.alias]
            item = dataclasses.replace(target, name=item.name)
        self.macros[item.name] = item

    def __len__(self) -> int:
        return len(self.macros) + len(self.environments)

    def trigger(self) -> re.Pattern[str] | None:
        """The pattern finding calls of this table's macros (cached while the names stay)."""
        key = (*self.macros, "", *self.environments)
        cached = self.__dict__.get("_trigger")
        if cached is None or cached[0] != key:
            cached = (key, _trigger(self))
            self.__dict__["_trigger"] = cached
        return cached[1]


def skip_space(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not white space."""
    # the pattern matches the empty string: there is always a match
    return cast(re.Match[str], _SPACE.match(text, pos)).end()


def group_end(text: str, pos: int) -> int:
    """Index after the ``}`` matching the ``{`` at ``pos``, or -1 when it is not closed."""
    depth = 0
    for match in _BRACE.finditer(text, pos):
        token = match.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return match.end()
    return -1


def bracket_end(text: str, pos: int) -> int:
    """Index after the ``]`` closing the ``[`` at ``pos`` (outside braces), or -1."""
    depth = 0
    for match in _BRACKET.finditer(text, pos + 1):
        token = match.group()
        if token == "{":
            depth += 1
        elif token == "}":
            depth = max(depth - 1, 0)
        elif token == "]" and depth == 0:
            return match.end()
    return -1


def _argument(text: str, pos: int) -> tuple[str, int] | object | None:
    """One undelimited argument at ``pos``: (text, end), ``_INCOMPLETE`` or None (a ``}``)."""
    pos = skip_space(text, pos)
    if pos >= len(text):
        return _INCOMPLETE
    char = text[pos]
    if char == "{":
        end = group_end(text, pos)
        return _INCOMPLETE if end < 0 else (text[pos + 1 : end - 1], end)
    if char == "}":
        return None
    if char == "\\":
        match = _CS.match(text, pos)
        return _INCOMPLETE if match is None else (match.group(), match.end())
    return char, pos + 1


def _name(text: str, pos: int) -> tuple[str, int]:
    """The macro name at ``pos``: ``\\name`` or ``{\\name}``."""
    pos = skip_space(text, pos)
    if text.startswith("{", pos):
        end = group_end(text, pos)
        match = _CS.fullmatch(text[pos + 1 : end - 1].strip()) if end > 0 else None
        if match is None:
            raise _MalformedError("the name is not one control sequence")
        return match.group()[1:], end
    match = _CS.match(text, pos)
    if match is None:
        raise _MalformedError("no control sequence after the defining command")
    return match.group()[1:], match.end()


def _optional(text: str, pos: int) -> tuple[str | None, int]:
    """``[..]`` at ``pos`` (after spaces): its content and end, or (None, pos)."""
    start = skip_space(text, pos)
    if not text.startswith("[", start):
        return None, pos
    end = bracket_end(text, start)
    if end < 0:
        raise _MalformedError("unclosed [")
    return text[start + 1 : end - 1], end


def _body(text: str, pos: int) -> tuple[str, int]:
    parsed = _argument(text, pos)
    if not isinstance(parsed, tuple):
        raise _MalformedError("no body")
    if _PARAGRAPH.search(parsed[0]):  # an unclosed body running into the text
        raise _MalformedError("the body spans paragraphs")
    return parsed


def _count(raw: str | None) -> int:
    if raw is not None and not (raw.strip().isdigit() and int(raw) <= 9):
        raise _MalformedError(f"bad parameter count [{raw}]")
    return int(raw or 0)


def _parse(command: str, text: str, pos: int) -> tuple[Macro | Environment, int, str | None]:
    if command in {"def", "gdef", "edef", "xdef"}:
        name, pos = _name(text, pos)
        brace = text.find("{", pos)
        params = text[pos:brace] if brace >= 0 else ""
        if brace < 0 or "}" in params or "\\par" in params:
            raise _MalformedError("no body")
        pieces = re.split(r"#([1-9])", params.strip())
        numbers = [int(number) for number in pieces[1::2]]
        if numbers != list(range(1, len(numbers) + 1)):
            raise _MalformedError("parameters out of order")
        body, end = _body(text, brace)
        delimiters = tuple(delim.strip() for delim in pieces[2::2])
        return Macro(name, len(numbers), body, None, pieces[0].strip(), delimiters), end, None
    if command == "let":
        name, pos = _name(text, pos)
        pos = skip_space(text, pos)
        if text.startswith("=", pos):
            pos = skip_space(text, pos + 1)
        parsed = _argument(text, pos)
        if not isinstance(parsed, tuple) or text.startswith("{", pos):
            raise _MalformedError("\\let without a target")
        target, end = parsed
        if target == "\\" + name:
            raise _MalformedError("\\let of a macro to itself")
        return Macro(name, 0, target), end, target[1:] if target.startswith("\\") else None
    star = text.startswith("*", skip_space(text, pos))
    if star:
        pos = skip_space(text, pos) + 1
    if command == "DeclareMathOperator":
        name, pos = _name(text, pos)
        body, end = _body(text, pos)
        return Macro(name, 0, f"\\operatorname{'*' if star else ''}{{{body}}}"), end, None
    if command in {"newenvironment", "renewenvironment"}:
        pos = skip_space(text, pos)
        end = group_end(text, pos) if text.startswith("{", pos) else -1
        if end < 0:
            raise _MalformedError("no environment name")
        env_name = text[pos + 1 : end - 1].strip()
        nargs_raw, pos = _optional(text, end)
        default, pos = _optional(text, pos) if nargs_raw else (None, pos)
        begin, pos = _body(text, pos)
        finish, end = _body(text, pos)
        return Environment(env_name, _count(nargs_raw), default, begin, finish), end, None
    name, pos = _name(text, pos)
    nargs_raw, pos = _optional(text, pos)
    nargs = _count(nargs_raw)
    default, pos = _optional(text, pos) if nargs else (None, pos)
    body, end = _body(text, pos)
    return Macro(name, nargs, body, default), end, None


def parse_definition(text: str, pos: int) -> Definition | None:
    """The definition whose command starts at ``pos``, or None when it cannot be parsed."""
    match = DEFINER.match(text, pos)
    if match is None or match.group("cmd") is None:
        return None
    command = match.group("cmd")
    try:
        item, end, alias = _parse(command, text, match.end())
    except _MalformedError as exc:
        logger.debug("ignoring \\%s at %d: %s", command, pos, exc)
        return None
    if isinstance(item, Macro) and item.name == "\\":
        return None
    return Definition(pos, end, command, item, alias)


def find_definitions(text: str) -> list[Definition]:
    """Every parseable definition in ``text``, in order (definitions inside bodies skipped)."""
    found: list[Definition] = []
    pos = 0
    while (match := DEFINER.search(text, pos)) is not None:
        definition = parse_definition(text, match.start()) if match.group("cmd") else None
        if definition is None:
            pos = match.end()
        else:
            found.append(definition)
            pos = definition.end
    return found


def collect_macros(source: str | Iterable[Definition]) -> MacroTable:
    """The :class:`MacroTable` of a text (or of definitions from :func:`find_definitions`)."""
    definitions = find_definitions(source) if isinstance(source, str) else source
    table = MacroTable()
    for definition in definitions:
        table.add(definition)
    return table


def blank_definitions(text: str, definitions: Iterable[Definition]) -> str:
    """``text`` with every definition replaced by one space."""
    pieces, last = [], 0
    for definition in definitions:
        pieces.append(text[last : definition.start])
        pieces.append(" ")
        last = definition.end
    pieces.append(text[last:])
    return "".join(pieces)


def environment_shorthands(table: MacroTable) -> MacroTable:
    """The macros and environments whose expansion opens or closes an environment or display."""

    def marks(body: str) -> bool:
        return any(m.group() != "\\\\" for m in _MARKER.finditer(body))

    names = {name for name, macro in table.macros.items() if marks(macro.body)}
    changed = True
    while changed:
        changed = False
        for name, macro in table.macros.items():
            if name not in names and any(cs[1:] in names for cs in _CS.findall(macro.body)):
                names.add(name)
                changed = True
    envs = {
        name: env
        for name, env in table.environments.items()
        if marks(env.begin + env.end) or any(cs[1:] in names for cs in _CS.findall(env.begin))
    }
    return MacroTable({name: table.macros[name] for name in names}, envs)


def _trigger(table: MacroTable) -> re.Pattern[str] | None:
    words = sorted((n for n in table.macros if re.fullmatch(r"[A-Za-z@]+", n)), key=len)
    symbols = [n for n in table.macros if len(n) == 1 and not n.isalpha() and n != "@"]
    parts = [r"\\(?P<pair>\\)"]
    if words:
        alternatives = "|".join(re.escape(n) for n in reversed(words))
        parts.append(rf"\\(?P<word>{alternatives})(?![A-Za-z@])")
    if symbols:
        parts.append(r"\\(?P<symbol>[" + "".join(re.escape(s) for s in symbols) + "])")
    if table.environments:
        alternatives = "|".join(re.escape(n) for n in table.environments)
        parts.append(rf"\\(?P<be>begin|end)\s*\{{(?P<env>{alternatives})\}}")
    return re.compile("|".join(parts)) if len(parts) > 1 else None
