"""The command tables of the pure-Python LaTeX -> MathML converter.

The MathML follows KaTeX's conventions (the converter of the KDD 2020 seed, section 3.1) so
that graphs built from either backend look alike: letters are ``mi``, upright capital Greek is
``mi mathvariant="normal"``, relations and operators are ``mo``, function names are ``mi``
followed by an invisible function application ``mo`` (U+2061), big operators take limits as
``munderover`` (``msubsup`` for integrals).
"""

from __future__ import annotations

# -- identifiers -------------------------------------------------------------------------------

_GREEK_LOWER = (
    "alpha α beta β gamma γ delta δ epsilon ϵ varepsilon ε zeta ζ eta η theta θ vartheta ϑ "
    "iota ι kappa κ varkappa ϰ lambda λ mu μ nu ν xi ξ omicron ο pi π varpi ϖ rho ρ varrho ϱ "
    "sigma σ varsigma ς tau τ upsilon υ phi ϕ varphi φ chi χ psi ψ omega ω digamma ϝ"
)
_GREEK_UPPER = (
    "Gamma Γ Delta Δ Theta Θ Lambda Λ Xi Ξ Pi Π Sigma Σ Upsilon Υ Phi Φ Psi Ψ Omega Ω "
    "varGamma Γ varDelta Δ varTheta Θ varLambda Λ varXi Ξ varPi Π varSigma Σ varUpsilon Υ "
    "varPhi Φ varPsi Ψ varOmega Ω"
)
_LETTERLIKE = (
    "ell ℓ hbar ℏ hslash ℏ imath ı jmath ȷ wp ℘ Re ℜ Im ℑ aleph ℵ beth ℶ gimel ℷ partial ∂ "
    "infty ∞ nabla ∇ emptyset ∅ varnothing ∅ eth ð mho ℧ Finv Ⅎ Game ⅁ complement ∁ "
    "prime ′ backprime ‵ top ⊤ bot ⊥ Box □ square □ blacksquare ■ Diamond ◊ lozenge ◊ "
    "triangle △ vartriangle △ angle ∠ measuredangle ∡ surd √ flat ♭ natural ♮ sharp ♯ "
    "clubsuit ♣ diamondsuit ♢ heartsuit ♡ spadesuit ♠ dagger † dag † ddagger ‡ ddag ‡ "
    "S § P ¶ checkmark ✓ circledR ® maltese ✠ degree ° pounds £ yen ¥ copyright ©"
)

# -- operators ---------------------------------------------------------------------------------

_BINARY = (
    "pm ± mp ∓ times × div ÷ cdot ⋅ ast ∗ star ⋆ circ ∘ bullet ∙ oplus ⊕ ominus ⊖ "
    "otimes ⊗ oslash ⊘ odot ⊙ bigcirc ◯ cap ∩ cup ∪ uplus ⊎ sqcap ⊓ sqcup ⊔ vee ∨ lor ∨ "
    "wedge ∧ land ∧ setminus ∖ smallsetminus ∖ wr ≀ diamond ⋄ bigtriangleup △ "
    "bigtriangledown ▽ triangleleft ◃ triangleright ▹ lhd ⊲ rhd ⊳ unlhd ⊴ unrhd ⊵ amalg ⨿ "
    "ltimes ⋉ rtimes ⋊ boxplus ⊞ boxminus ⊟ boxtimes ⊠ boxdot ⊡ dotplus ∔ divideontimes ⋇ "
    "centerdot ⋅ intercal ⊺ barwedge ⊼ veebar ⊻ curlywedge ⋏ curlyvee ⋎ Cap ⋒ Cup ⋓ "
    "circledast ⊛ circledcirc ⊚ circleddash ⊝ neg ¬ lnot ¬ forall ∀ exists ∃ nexists ∄ "
    "cdotp ⋅ ldotp . colon : vert ∣ Vert ∥ | ∥ backslash ∖ mid ∣ nmid ∤ parallel ∥ "
    "nparallel ∦ therefore ∴ because ∵ ldots … dots … cdots ⋯ vdots ⋮ ddots ⋱ dotsc … "
    "dotsb ⋯ dotsm ⋯ dotsi ⋯ dotso … hdots …"
)
_RELATIONS = (
    "leq ≤ le ≤ geq ≥ ge ≥ neq ≠ ne ≠ equiv ≡ sim ∼ simeq ≃ approx ≈ cong ≅ propto ∝ "
    "ll ≪ gg ≫ lll ⋘ ggg ⋙ subset ⊂ supset ⊃ subseteq ⊆ supseteq ⊇ subsetneq ⊊ supsetneq ⊋ "
    "sqsubset ⊏ sqsupset ⊐ sqsubseteq ⊑ sqsupseteq ⊒ in ∈ ni ∋ notin ∉ owns ∋ perp ⊥ "
    "vdash ⊢ dashv ⊣ models ⊨ Vdash ⊩ vDash ⊨ smile ⌣ frown ⌢ asymp ≍ doteq ≐ bowtie ⋈ "
    "prec ≺ succ ≻ preceq ⪯ succeq ⪰ lesssim ≲ gtrsim ≳ lessapprox ⪅ gtrapprox ⪆ "
    "leqslant ⩽ geqslant ⩾ lesseqgtr ⋚ gtreqless ⋛ approxeq ≊ thicksim ∼ thickapprox ≈ "
    "triangleq ≜ coloneqq ≔ eqqcolon ≕ risingdotseq ≓ fallingdotseq ≒ doteqdot ≑ "
    "circeq ≗ bumpeq ≏ Bumpeq ≎ backsim ∽ backsimeq ⋍ nless ≮ ngtr ≯ nleq ≰ ngeq ≱ "
    "nsim ≁ ncong ≇ nsubseteq ⊈ nsupseteq ⊉ lneq ⪇ gneq ⪈ varpropto ∝ between ≬ "
    "pitchfork ⋔ trianglelefteq ⊴ trianglerighteq ⊵ vartriangleleft ⊲ vartriangleright ⊳ "
    "leftarrow ← gets ← rightarrow → to → leftrightarrow ↔ Leftarrow ⇐ Rightarrow ⇒ "
    "Leftrightarrow ⇔ longleftarrow ⟵ longrightarrow ⟶ longleftrightarrow ⟷ "
    "Longleftarrow ⟸ Longrightarrow ⟹ Longleftrightarrow ⟺ iff ⟺ implies ⟹ impliedby ⟸ "
    "mapsto ↦ longmapsto ⟼ hookleftarrow ↩ hookrightarrow ↪ uparrow ↑ downarrow ↓ "
    "updownarrow ↕ Uparrow ⇑ Downarrow ⇓ Updownarrow ⇕ nearrow ↗ searrow ↘ swarrow ↙ "
    "nwarrow ↖ leftharpoonup ↼ leftharpoondown ↽ rightharpoonup ⇀ rightharpoondown ⇁ "
    "rightleftharpoons ⇌ leftrightharpoons ⇋ rightleftarrows ⇄ leftrightarrows ⇆ "
    "rightrightarrows ⇉ leftleftarrows ⇇ twoheadrightarrow ↠ twoheadleftarrow ↞ "
    "rightsquigarrow ⇝ leadsto ⇝ curvearrowright ↷ curvearrowleft ↶ circlearrowright ↻ "
    "circlearrowleft ↺ Lsh ↰ Rsh ↱ upharpoonleft ↿ upharpoonright ↾ downharpoonleft ⇃ "
    "downharpoonright ⇂ nleftarrow ↚ nrightarrow ↛ nLeftarrow ⇍ nRightarrow ⇏ "
    "leftrightsquigarrow ↭ multimap ⊸ lhook ↩ rhook ↪"
)
_FENCES = (
    "langle ⟨ rangle ⟩ lbrace { rbrace } lbrack [ rbrack ] lceil ⌈ rceil ⌉ lfloor ⌊ "
    "rfloor ⌋ lvert ∣ rvert ∣ lVert ∥ rVert ∥ { { } } ulcorner ┌ urcorner ┐ llcorner └ "
    "lrcorner ┘ lgroup ⟮ rgroup ⟯ lmoustache ⎰ rmoustache ⎱"
)
_LARGE_OPS = (
    "sum ∑ prod ∏ coprod ∐ bigcup ⋃ bigcap ⋂ bigoplus ⨁ bigotimes ⨂ bigodot ⨀ biguplus ⨄ "
    "bigsqcup ⨆ bigvee ⋁ bigwedge ⋀"
)
_INTEGRALS = "int ∫ iint ∬ iiint ∭ oint ∮ oiint ∯ oiiint ∰ intop ∫ smallint ∫"
_FUNCTIONS = (
    "arcsin arccos arctan arctg arcctg arg ch cos cosec cosh cot cotg coth csc ctg cth deg "
    "dim exp hom ker lg ln log sec sh sin sinh tan tanh tg th"
)
_LIMIT_FUNCTIONS = "det gcd inf lim liminf limsup max min Pr sup injlim projlim"

# -- accents (mover accent="true") -------------------------------------------------------------

ACCENTS: dict[str, tuple[str, bool]] = {
    "hat": ("^", False),
    "widehat": ("^", True),
    "check": ("ˇ", False),
    "widecheck": ("ˇ", True),
    "tilde": ("~", False),
    "widetilde": ("~", True),
    "acute": ("ˊ", False),
    "grave": ("ˋ", False),
    "dot": ("˙", False),
    "ddot": ("¨", False),
    "dddot": ("⃛", False),
    "breve": ("˘", False),
    "bar": ("ˉ", False),
    "vec": ("⃗", False),
    "mathring": ("˚", False),
    "overline": ("‾", True),
    "overrightarrow": ("→", True),
    "overleftarrow": ("←", True),
    "overleftrightarrow": ("↔", True),
    "overbrace": ("⏞", True),
    "Vec": ("⃗", False),
}
UNDER_ACCENTS: dict[str, str] = {
    "underline": "‾",
    "underbrace": "⏟",
    "underrightarrow": "→",
    "underleftarrow": "←",
    "utilde": "~",
}

# -- fonts -------------------------------------------------------------------------------------

#: ``\mathxx{..}`` (argument) font commands -> mathvariant.
FONT_COMMANDS: dict[str, str] = {
    "mathrm": "normal",
    "mathup": "normal",
    "mathbf": "bold",
    "mathit": "italic",
    "mathsf": "sans-serif",
    "mathtt": "monospace",
    "mathcal": "script",
    "mathscr": "script",
    "mathbb": "double-struck",
    "Bbb": "double-struck",
    "mathfrak": "fraktur",
    "frak": "fraktur",
    "boldsymbol": "bold-italic",
    "bm": "bold-italic",
    "bold": "bold",
    "pmb": "bold-italic",
    "mathnormal": "italic",
    "mit": "italic",
}
#: ``{\rm ..}`` (switch) font commands -> mathvariant.
FONT_SWITCHES: dict[str, str] = {
    "rm": "normal",
    "bf": "bold",
    "it": "italic",
    "sf": "sans-serif",
    "tt": "monospace",
    "cal": "script",
    "mit": "italic",
    "Bbb": "double-struck",
    "frak": "fraktur",
    "bold": "bold",
    "bfseries": "bold",
    "rmfamily": "normal",
    "itshape": "italic",
    "em": "italic",
    "sl": "italic",
    "sc": "normal",
    "boldmath": "bold",
    "unboldmath": "normal",
}
#: Text-mode commands whose argument is text (``mtext``).
TEXT_COMMANDS = frozenset(
    [
        "text",
        "textrm",
        "textup",
        "textnormal",
        "mbox",
        "hbox",
        "textit",
        "textbf",
        "textsf",
        "texttt",
        "textsl",
        "textsc",
        "emph",
        "fbox",
        "framebox",
        "vbox",
        "makebox",
    ]
)
STYLE_SWITCHES: dict[str, dict[str, str]] = {
    "displaystyle": {"displaystyle": "true", "scriptlevel": "0"},
    "textstyle": {"displaystyle": "false", "scriptlevel": "0"},
    "scriptstyle": {"displaystyle": "false", "scriptlevel": "1"},
    "scriptscriptstyle": {"displaystyle": "false", "scriptlevel": "2"},
}
SIZE_SWITCHES: dict[str, str] = {
    "tiny": "0.5em",
    "scriptsize": "0.7em",
    "footnotesize": "0.8em",
    "small": "0.9em",
    "normalsize": "1em",
    "large": "1.2em",
    "Large": "1.44em",
    "LARGE": "1.728em",
    "huge": "2.074em",
    "Huge": "2.488em",
}

# -- spacing -----------------------------------------------------------------------------------

SPACES: dict[str, str] = {
    "quad": "1em",
    "qquad": "2em",
    ",": "0.1667em",
    "thinspace": "0.1667em",
    ":": "0.2222em",
    ">": "0.2222em",
    "medspace": "0.2222em",
    ";": "0.2778em",
    "thickspace": "0.2778em",
    "!": "-0.1667em",
    "negthinspace": "-0.1667em",
    "negmedspace": "-0.2222em",
    "negthickspace": "-0.2778em",
    "enspace": "0.5em",
    "enskip": "0.5em",
}
#: Sizes of ``\big`` and friends (KaTeX: ``minsize``/``maxsize``).
BIG_SIZES: dict[str, str] = {}
for _name, _size in (("big", "1.2em"), ("Big", "1.8em"), ("bigg", "2.4em"), ("Bigg", "3em")):
    for _suffix in ("", "l", "r", "m"):
        BIG_SIZES[_name + _suffix] = _size

#: Commands that only influence layout, numbering or references: dropped.
IGNORED = frozenset(
    [
        "nonumber",
        "notag",
        "relax",
        "limits",
        "nolimits",
        "nobreak",
        "allowbreak",
        "label",
        "tag",
        "protect",
        "hline",
        "cline",
        "newline",
        "medskip",
        "smallskip",
        "bigskip",
        "noindent",
        "strut",
        "mathstrut",
        "displaybreak",
        "linebreak",
        "pagebreak",
        "centering",
        "raggedright",
        "noalign",
        "hfill",
        "hfil",
        "vfill",
        "rule",
        "vspace",
        "vskip",
        "index",
        "begingroup",
        "endgroup",
    ]
)
#: Commands that take arguments that are dropped with them: name -> number of arguments.
DROPPED_WITH_ARGS: dict[str, int] = {
    "label": 1,
    "tag": 1,
    "setcounter": 2,
    "addtocounter": 2,
    "vspace": 1,
    "vskip": 0,
    "index": 1,
    "ref": 1,
    "eqref": 1,
    "cite": 1,
    "epsfbox": 1,
    "epsfig": 1,
    "includegraphics": 1,
    "eqlabel": 1,
    "nonumber": 0,
    "cline": 1,
    "rule": 2,
}


def _pairs(table: str) -> dict[str, str]:
    words = table.split()
    return dict(zip(words[::2], words[1::2], strict=True))


GREEK_LOWER = _pairs(_GREEK_LOWER)
GREEK_UPPER = _pairs(_GREEK_UPPER)
LETTERLIKE = _pairs(_LETTERLIKE)
BINARY = _pairs(_BINARY)
RELATIONS = _pairs(_RELATIONS)
FENCES = _pairs(_FENCES)
LARGE_OPS = _pairs(_LARGE_OPS)
INTEGRALS = _pairs(_INTEGRALS)
FUNCTIONS = frozenset(_FUNCTIONS.split())
LIMIT_FUNCTIONS = frozenset(_LIMIT_FUNCTIONS.split())

#: Characters typed directly that are operators (``mo``) rather than identifiers.
OPERATOR_CHARS = frozenset("+-=<>*/!|,;:?.()[]'@\"`")
#: Operator characters that KaTeX marks ``stretchy="false"``.
NONSTRETCHY = frozenset("()[]{}⟨⟩⌈⌉⌊⌋/|∣∥")
#: Fence characters a ``\left``/``\right``/``\big`` may take.
DELIMITERS = frozenset("()[]{}<>|/.\\⟨⟩⌈⌉⌊⌋∣∥↑↓↕⇑⇓⇕")

#: Array-like environments -> (left fence, right fence).
MATRIX_ENVIRONMENTS: dict[str, tuple[str, str]] = {
    "array": ("", ""),
    "darray": ("", ""),
    "subarray": ("", ""),
    "matrix": ("", ""),
    "smallmatrix": ("", ""),
    "pmatrix": ("(", ")"),
    "bmatrix": ("[", "]"),
    "Bmatrix": ("{", "}"),
    "vmatrix": ("|", "|"),
    "Vmatrix": ("∥", "∥"),
    "cases": ("{", ""),
    "dcases": ("{", ""),
    "rcases": ("", "}"),
    "aligned": ("", ""),
    "alignedat": ("", ""),
    "split": ("", ""),
    "gathered": ("", ""),
    "eqnarray": ("", ""),
    "eqnarray*": ("", ""),
    "align": ("", ""),
    "align*": ("", ""),
    "alignat": ("", ""),
    "alignat*": ("", ""),
    "gather": ("", ""),
    "gather*": ("", ""),
    "multline": ("", ""),
    "multline*": ("", ""),
    "flalign": ("", ""),
    "flalign*": ("", ""),
    "equation": ("", ""),
    "equation*": ("", ""),
    "displaymath": ("", ""),
    "tabular": ("", ""),
    "CD": ("", ""),
}
#: Environments whose first argument is a column specification to skip.
ENVIRONMENTS_WITH_SPEC = frozenset(
    {"array", "darray", "subarray", "tabular", "alignat", "alignat*"}
)
#: Plain-TeX matrix macros ``\matrix{a & b \cr c & d}`` -> fences.
PLAIN_MATRICES: dict[str, tuple[str, str]] = {
    "matrix": ("", ""),
    "pmatrix": ("(", ")"),
    "bordermatrix": ("(", ")"),
    "cases": ("{", ""),
    "eqalign": ("", ""),
    "eqalignno": ("", ""),
    "displaylines": ("", ""),
}


#: Flags of :data:`SYMBOL_COMMANDS`: takes limits, is a function name (apply U+2061).
LIMITS_FLAG, APPLY_FLAG = 1, 2
_NORMAL = {"mathvariant": "normal"}
_NONSTRETCHY = {"stretchy": "false"}


def _symbol_table() -> dict[str, tuple[str, dict[str, str] | None, str, int]]:
    """Commands that are one symbol: name -> (tag, attributes, text, flags); first table wins."""
    table: dict[str, tuple[str, dict[str, str] | None, str, int]] = {}
    layers = [
        ({name: name for name in LIMIT_FUNCTIONS}, "mi", None, LIMITS_FLAG | APPLY_FLAG),
        ({name: name for name in FUNCTIONS}, "mi", None, APPLY_FLAG),
        (INTEGRALS, "mo", None, 0),
        (LARGE_OPS, "mo", None, LIMITS_FLAG),
        (FENCES, "mo", _NONSTRETCHY, 0),
        (BINARY, "mo", None, 0),
        (RELATIONS, "mo", None, 0),
        (LETTERLIKE, "mi", None, 0),
        (GREEK_UPPER, "mi", _NORMAL, 0),
        (GREEK_LOWER, "mi", None, 0),
    ]
    for names, tag, attrs, flags in layers:
        for name, text in names.items():
            table[name] = (tag, attrs, text, flags)
    return table


#: Commands that are one symbol: name -> (tag, attributes, text, flags).
SYMBOL_COMMANDS = _symbol_table()
