r"""The recursive-descent parser behind :func:`mathsearch.indexer.latex_to_mathml.latex_to_mathml`.

It reads a token list (control sequences, numbers, characters, ``" "`` for whitespace) and
builds :class:`MathNode` lists. Nesting is bounded by ``max_depth`` (``LimitExceeded``), so
10,000-deep braces fail fast instead of exhausting the stack.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mathsearch.indexer import latex_symbols as sym
from mathsearch.indexer.errors import ConversionError, LimitExceeded
from mathsearch.indexer.mathml_tree import MathNode

_APPLY = "\u2061"
_END_OF_ROW = frozenset({"&", "\\\\", "\\cr", "\\end", "}"})
_INFIX = frozenset({"\\over", "\\atop", "\\choose", "\\above", "\\brace", "\\brack"})
_SCRIPT = frozenset({"^", "_", "'"})
_LIMITS = frozenset({"\\limits", "\\nolimits"})
_SCRIPT_OR_LIMITS = _SCRIPT | _LIMITS
_SPACE, _BREAK, _SCRIPT_KIND, _INFIX_KIND, _SWITCH = range(5)
#: Tokens that parse_list treats specially, and how.
_KINDS: dict[str, int] = {" ": _SPACE}
_KINDS.update(dict.fromkeys(_END_OF_ROW | {"\\right", "\\middle"}, _BREAK))
_KINDS.update(dict.fromkeys(_SCRIPT, _SCRIPT_KIND))
_KINDS.update(dict.fromkeys(_INFIX, _INFIX_KIND))
_KINDS.update(dict.fromkeys(["\\" + name for name in sym.STYLE_SWITCHES], _SWITCH))
_KINDS.update(dict.fromkeys(["\\" + name for name in sym.SIZE_SWITCHES], _SWITCH))
_LETTER_VARIANTS_MERGED = frozenset({"normal", "bold", "sans-serif", "monospace"})
Handler = Callable[["Parser", str], "MathNode | None"]
_SYMBOLS = sym.SYMBOL_COMMANDS
_LIMITS_FLAG, _APPLY_FLAG = sym.LIMITS_FLAG, sym.APPLY_FLAG


def _mo(text: str, attrs: dict[str, str] | None = None) -> MathNode:
    return MathNode("mo", attrs, text=text)


def _row(nodes: list[MathNode]) -> MathNode:
    return nodes[0] if len(nodes) == 1 else MathNode("mrow", children=nodes)


class Parser:
    """One conversion's state: the tokens, the cursor, the font and the unknown macros."""

    def __init__(
        self,
        tokens: list[str],
        max_depth: int = 128,
        strict: bool = False,
        handlers: Mapping[str, Callable[[Parser, str], MathNode | None]] | None = None,
    ) -> None:
        # ``handlers``: commands with arguments (latex_commands and latex_tables, joined by
        # latex_to_mathml); without them only symbols and plain tokens are read.
        self.handlers = handlers or {}
        self.toks = tokens
        self.i = 0
        self.n = len(tokens)
        self.depth = 0
        self.max_depth = max_depth
        self.strict = strict
        self.variant: str | None = None
        self.unknown: list[str] = []
        self.apply_function = False
        self.limits = False

    # -- driver -------------------------------------------------------------------------------

    def parse_all(self) -> list[MathNode]:
        nodes = self.parse_list(frozenset())
        if self.i < self.n:
            tok = self.toks[self.i]
            if tok == "}":
                raise ConversionError("unbalanced braces: extra '}'", reason="unbalanced-braces")
            if tok == "\\end":
                raise ConversionError("\\end without \\begin", reason="mismatched-environment")
            if tok == "\\right":
                self.i += 1
                self.delimiter()
                return [*nodes, *self.parse_all()]
            # A stray row/column separator outside any table: a line break, as KaTeX does.
            self.i += 1
            rest = self.parse_all()
            return [*nodes, MathNode("mspace", {"linebreak": "newline"}), *rest]
        return nodes

    def enter(self) -> None:
        self.depth += 1
        if self.depth > self.max_depth:
            raise LimitExceeded(f"nested deeper than {self.max_depth} levels", reason="too-deep")

    def parse_list(self, stop: frozenset[str]) -> list[MathNode]:
        """Atoms with their scripts until a token of ``stop``, ``}``, a row end or the end."""
        self.enter()
        saved_variant = self.variant
        nodes: list[MathNode] = []
        toks = self.toks
        n = self.n
        kinds = _KINDS
        while self.i < n:
            tok = toks[self.i]
            kind = kinds.get(tok)
            if kind is None:
                if stop and tok in stop:
                    break
                self.i += 1
                if len(tok) == 1 and self.variant is None:
                    # Fast path: one letter or one digit, the most frequent tokens.
                    if tok.isalpha():
                        atom: MathNode | None = MathNode("mi", text=tok)
                    elif tok.isdigit():
                        atom = MathNode("mn", text=tok)
                    else:
                        atom = self.atom(tok)
                else:
                    atom = self.atom(tok)
                if atom is None:
                    continue
                apply, self.apply_function = self.apply_function, False
                if self.i < n and toks[self.i] in _SCRIPT_OR_LIMITS:
                    atom = self.scripts(atom)
                else:
                    self.limits = False
                nodes.append(atom)
                if apply:
                    nodes.append(_mo(_APPLY))
            elif kind == _SPACE:
                self.i += 1
            elif kind == _BREAK:
                break
            elif kind == _SCRIPT_KIND:
                self.limits = False
                base = nodes.pop() if nodes else MathNode("mrow")
                nodes.append(self.scripts(base))
            elif kind == _INFIX_KIND:
                self.i += 1
                nodes = [self.infix(tok, nodes, stop)]
                break
            else:  # a style or size switch: applies to the rest of the list
                self.i += 1
                inner = self.parse_list(stop)
                name = tok[1:]
                attrs = (
                    dict(sym.STYLE_SWITCHES[name])
                    if name in sym.STYLE_SWITCHES
                    else {"mathsize": sym.SIZE_SWITCHES[name]}
                )
                nodes.append(MathNode("mstyle", attrs, children=inner))
                break
        self.variant = saved_variant
        self.depth -= 1
        return nodes

    def infix(self, tok: str, numerator: list[MathNode], stop: frozenset[str]) -> MathNode:
        denominator = self.parse_list(stop)
        attrs = None if tok in ("\\over", "\\above") else {"linethickness": "0px"}
        frac = MathNode("mfrac", attrs, children=[_row(numerator), _row(denominator)])
        fences = {"\\choose": ("(", ")"), "\\brace": ("{", "}"), "\\brack": ("[", "]")}
        if tok in fences:
            left, right = fences[tok]
            return MathNode(
                "mrow", children=[_mo(left, {"fence": "true"}), frac, _mo(right, {"fence": "true"})]
            )
        return frac

    # -- scripts --------------------------------------------------------------------------------

    def scripts(self, base: MathNode) -> MathNode:
        sub: MathNode | None = None
        sup: MathNode | None = None
        primes = 0
        limits = self.limits
        self.limits = False
        toks = self.toks
        while self.i < self.n:
            tok = toks[self.i]
            if tok == "'":
                primes += 1
                self.i += 1
            elif tok == "^" and sup is None:
                self.i += 1
                sup = self.argument()
            elif tok == "_" and sub is None:
                self.i += 1
                sub = self.argument()
            elif tok == "\\limits":
                limits = True
                self.i += 1
            elif tok == "\\nolimits":
                limits = False
                self.i += 1
            elif tok == " ":
                self.i += 1
            else:
                break
        if primes:
            prime = _mo("′" * primes, {"lspace": "0em", "rspace": "0em"})
            sup = prime if sup is None else MathNode("mrow", children=[prime, sup])
        if sub is None and sup is None:
            return base
        if limits:
            if sub is None:
                return MathNode("mover", children=[base, sup])  # type: ignore[list-item]
            if sup is None:
                return MathNode("munder", children=[base, sub])
            return MathNode("munderover", children=[base, sub, sup])
        if sub is None:
            return MathNode("msup", children=[base, sup])  # type: ignore[list-item]
        if sup is None:
            return MathNode("msub", children=[base, sub])
        return MathNode("msubsup", children=[base, sub, sup])

    # -- arguments ------------------------------------------------------------------------------

    def skip_spaces(self) -> None:
        while self.i < self.n and self.toks[self.i] == " ":
            self.i += 1

    def argument(self) -> MathNode:
        """One TeX argument: a brace group, a control sequence or a single character."""
        self.skip_spaces()
        if self.i >= self.n:
            raise ConversionError(
                "a command or script is missing its argument", reason="missing-argument"
            )
        tok = self.toks[self.i]
        if tok == "{":
            self.i += 1
            return _row(self.group_body())
        if tok in _END_OF_ROW or tok in _SCRIPT or tok in _INFIX or tok == "\\right":
            raise ConversionError(f"missing argument before {tok!r}", reason="missing-argument")
        if len(tok) > 1 and tok[0] != "\\":
            # "x^12" is x^1 2 in TeX: take one character of a number.
            self.toks[self.i] = tok[1:]
            tok = tok[0]
        else:
            self.i += 1
        self.enter()
        saved_apply = self.apply_function
        atom = self.atom(tok)
        self.apply_function = saved_apply
        self.depth -= 1
        return atom if atom is not None else MathNode("mrow")

    def group_body(self) -> list[MathNode]:
        """The nodes up to the ``}`` that closes a group whose ``{`` was consumed."""
        nodes = self.parse_list(frozenset({"}"}))
        while self.i < self.n and self.toks[self.i] != "}":
            tok = self.toks[self.i]
            if tok == "\\right":  # a \right whose \left is outside this group: lenient
                self.i += 1
                nodes.append(self.fence(self.delimiter(), "false"))
            elif tok in ("&", "\\\\", "\\cr", "\\middle"):
                self.i += 1
                if tok == "\\middle":
                    nodes.append(self.fence(self.delimiter(), "false"))
            elif tok == "\\end":
                raise ConversionError("\\end inside a brace group", reason="mismatched-environment")
            nodes.extend(self.parse_list(frozenset({"}"})))
        if self.i >= self.n:
            raise ConversionError("unbalanced braces: missing '}'", reason="unbalanced-braces")
        self.i += 1
        return nodes

    def raw_group(self) -> str:
        """The raw text of a brace group (or one token), for text and names."""
        self.skip_spaces()
        if self.i >= self.n:
            raise ConversionError("missing argument", reason="missing-argument")
        if self.toks[self.i] != "{":
            self.i += 1
            return self.toks[self.i - 1]
        level = 0
        start = self.i
        while self.i < self.n:
            tok = self.toks[self.i]
            self.i += 1
            if tok == "{":
                level += 1
            elif tok == "}":
                level -= 1
                if level == 0:
                    return "".join(self.toks[start + 1 : self.i - 1])
        raise ConversionError("unbalanced braces: missing '}'", reason="unbalanced-braces")

    def optional(self) -> list[MathNode] | None:
        """An optional ``[..]`` argument as nodes, or None."""
        self.skip_spaces()
        if self.i >= self.n or self.toks[self.i] != "[":
            return None
        self.i += 1
        nodes = self.parse_list(frozenset({"]"}))
        if self.i >= self.n or self.toks[self.i] != "]":
            raise ConversionError("unclosed optional argument '['", reason="unbalanced-braces")
        self.i += 1
        return nodes

    def delimiter(self) -> str:
        self.skip_spaces()
        if self.i >= self.n:
            raise ConversionError(
                "missing delimiter after \\left/\\right", reason="missing-argument"
            )
        tok = self.toks[self.i]
        if tok == "{":  # \big{(} is written in the wild
            tok = "".join(self.raw_group().split()) or "."
        else:
            self.i += 1
        if tok == ".":
            return ""
        if tok[0] == "\\" and len(tok) > 1:
            name = tok[1:]
            for table in (sym.FENCES, sym.RELATIONS, sym.BINARY):
                if name in table:
                    return table[name]
            if name in "{}|":
                return {"|": "∥"}.get(name, name)
            return self.unknown_macro(name).text or ""
        return tok

    def fence(self, char: str, fence: str = "true") -> MathNode:
        return _mo(
            char, {"fence": fence, "stretchy": "true"} if fence == "false" else {"fence": "true"}
        )

    # -- atoms ----------------------------------------------------------------------------------

    def atom(self, tok: str) -> MathNode | None:
        """The node of a token whose scripts are not read yet (None: nothing to draw)."""
        first = tok[0]
        if first == "\\" and len(tok) > 1:
            return self.command(tok[1:])
        if first.isdigit() or (first == "." and len(tok) > 1):
            return MathNode("mn", text=tok)
        if first.isalpha():
            return self.letter(tok)
        if tok == "{":
            return _row(self.group_body())
        if tok == "~":
            return MathNode("mtext", text="\u00a0")
        if tok == "#":
            raise ConversionError(
                "macro parameter '#' outside a definition", reason="macro-parameter"
            )
        if tok == "$":
            return None
        if tok in sym.NONSTRETCHY:
            return _mo(tok, {"stretchy": "false"})
        if tok == ",":
            return _mo(",", {"separator": "true"})
        if tok in sym.OPERATOR_CHARS or not tok.isalnum():
            return _mo(tok)
        return MathNode("mi", text=tok)

    def letter(self, tok: str) -> MathNode:
        variant = self.variant
        if variant is None or variant == "italic":
            return MathNode("mi", text=tok)
        if variant in _LETTER_VARIANTS_MERGED:
            # KaTeX merges a run of letters in an upright font into one identifier.
            text = [tok]
            toks = self.toks
            while self.i < self.n and len(toks[self.i]) == 1 and toks[self.i].isalpha():
                text.append(toks[self.i])
                self.i += 1
            return MathNode("mi", {"mathvariant": variant}, text="".join(text))
        return MathNode("mi", {"mathvariant": variant}, text=tok)

    def command(self, name: str) -> MathNode | None:
        handler = self.handlers.get(name)
        if handler is not None:
            return handler(self, name)
        entry = _SYMBOLS.get(name)
        if entry is not None:
            tag, attrs, text, flags = entry
            if flags:
                self.limits = bool(flags & _LIMITS_FLAG)
                self.apply_function = bool(flags & _APPLY_FLAG)
            return MathNode(tag, attrs, text=text)
        if name in sym.SPACES:
            return MathNode("mspace", {"width": sym.SPACES[name]})
        if name in sym.FONT_SWITCHES:
            self.variant = sym.FONT_SWITCHES[name]
            return None
        if name in sym.DROPPED_WITH_ARGS:
            for _ in range(sym.DROPPED_WITH_ARGS[name]):
                if self.i < self.n and self.toks[self.i] == "*":
                    self.i += 1
                self.raw_group()
            return None
        if name in sym.IGNORED:
            return None
        if len(name) == 1 and not name.isalpha():
            return self.escaped(name)
        return self.unknown_macro(name)

    def escaped(self, char: str) -> MathNode | None:
        if char == " ":
            return MathNode("mtext", text="\u00a0")
        if char in "{}":
            return _mo(char, {"stretchy": "false"})
        if char == "|":
            return _mo("∥")
        if char in "/-":  # italic correction, discretionary hyphen
            return None
        if char in "#$%&_":
            return MathNode("mi", text=char) if char != "%" else _mo("%")
        return _mo(char)

    def unknown_macro(self, name: str) -> MathNode:
        if self.strict:
            raise ConversionError(f"undefined control sequence \\{name}", reason="unknown-macro")
        self.unknown.append(name)
        return MathNode("mi", {"mathvariant": "normal"}, text="\\" + name)
