"""RAKE keyword extraction (Rose, Engel, Cramer & Cowley 2010), torch-free.

The ECML 2019 seed (sec. 4.2, "Abstract-Keywords as Labels") labels equations with keywords that
RAKE extracts from the text around them. RAKE, as published:

1. **candidates**: the text is split into phrases at phrase delimiters (punctuation) and at
   stop words; each maximal run of content words is a candidate keyword;
2. **word scores**: over the candidates, ``freq(w)`` counts the candidates a word occurs in (with
   repeats) and ``deg(w)`` sums the lengths of those candidates (the word's degree in the
   co-occurrence graph, itself included); a word scores ``deg(w) / freq(w)``;
3. **keyword score**: the sum of its words' scores; adjoining keywords that occur at least twice
   in the same order with the same interior stop word (e.g. "axis of evil") become candidates
   too;
4. **selection**: the top ``T`` keywords, ``T`` a third of the content words by default.

For LaTeX prose (the ``context`` of .tex records) inline math (``$...$``, ``\\(...\\)``) and
commands (``\\cite{...}``, ``\\ref{...}``, ``\\emph``) are delimiters too, and words that are
numbers or single letters are no keywords (a single letter in physics prose is a variable).
The stop list is the SMART-style list RAKE ships with (abridged to common English function
words).

Example:
    >>> [k for k, _ in rake_keywords(
    ...     "Compatibility of systems of linear constraints over the set of natural numbers. "
    ...     "Criteria of compatibility of a system of linear Diophantine equations are considered."
    ... )][:3]
    ['linear diophantine equations', 'linear constraints', 'natural numbers']
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence

logger = logging.getLogger(__name__)

__all__ = [
    "STOPWORDS",
    "candidate_phrases",
    "keyword_scores",
    "rake_keywords",
    "strip_latex",
    "word_scores",
]

_STOPWORDS_TEXT = """
    a about above across after afterwards again against all almost alone along already also
    although always am among amongst an and another any anyhow anyone anything anyway anywhere
    are around as at be became because become becomes becoming been before beforehand behind
    being below beside besides between beyond both but by can cannot could did do does doing
    done down due during each eg either else elsewhere enough especially etc even ever every
    everyone everything everywhere except few first for former formerly from further furthermore
    get gets given gives go had has have having he hence her here hereafter hereby herein hers
    herself him himself his how however i ie if in indeed instead into is it its itself just
    last latter latterly least less let like made make makes many may me meanwhile might more
    moreover most mostly much must my myself namely neither never nevertheless next no nobody
    none nor not nothing now nowhere obtain obtained of off often on once one only onto or other
    others otherwise our ours ourselves out over own per perhaps please put rather re same see
    seem seemed seeming seems several she should show shown shows since so some somehow someone
    something sometime sometimes somewhere still such than that the their theirs them themselves
    then thence there thereafter thereby therefore therein thereupon these they this those though
    through throughout thru thus to together too toward towards under until up upon us use used
    uses using very via was we well were what whatever when whence whenever where whereafter
    whereas whereby wherein whereupon wherever whether which while whither who whoever whole whom
    whose why will with within without would yet you your yours yourself yourselves
    consider considered find follows following write written two three eq eqs section fig
    figure ref
    """
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())

_MATH = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|\\\(.*?\\\)|\\\[.*?\\\]", re.DOTALL)
_COMMAND_ARG = re.compile(r"\\(?:cite[tp]?|ref|eqref|label|footnote|url|bibitem)\*?\{[^{}]*\}")
_COMMAND = re.compile(r"\\[A-Za-z]+\*?|\\.")
_DELIMITERS = re.compile(r"[.,;:!?()\[\]{}\"'`|<>=+*/\\&%#~^_\n\t-]+(?:\s|$)|[.,;:!?()\[\]{}\"`|]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*|[0-9][A-Za-z0-9'.-]*")
#: The marker where LaTeX math and commands stood: a delimiter.
_BREAK = " . "


def strip_latex(text: str) -> str:
    """Prose of LaTeX text: math, references and commands become phrase delimiters."""
    text = _MATH.sub(_BREAK, text)
    text = _COMMAND_ARG.sub(_BREAK, text)
    return _COMMAND.sub(_BREAK, text).replace("{", " ").replace("}", " ")


def _is_content(word: str, stopwords: frozenset[str]) -> bool:
    return word not in stopwords and len(word) > 1 and not word[0].isdigit()


def _runs(text: str, stopwords: frozenset[str]) -> list[list[str]]:
    """Word runs between punctuation delimiters (stop words still inside)."""
    out: list[list[str]] = []
    for fragment in _DELIMITERS.split(strip_latex(text).lower()):
        words = _WORD.findall(fragment)
        if words:
            out.append(words)
    return out


def candidate_phrases(
    text: str, stopwords: frozenset[str] = STOPWORDS, max_words: int = 0
) -> list[tuple[str, ...]]:
    """RAKE step 1: maximal runs of content words, in text order (repeats kept).

    ``max_words`` > 0 drops longer candidates (RAKE itself keeps them).

    >>> candidate_phrases("the free action of a scalar field")
    [('free', 'action'), ('scalar', 'field')]
    """
    phrases: list[tuple[str, ...]] = []
    for run in _runs(text, stopwords):
        current: list[str] = []
        for word in [*run, ""]:
            if word and _is_content(word, stopwords):
                current.append(word)
                continue
            if current and (max_words <= 0 or len(current) <= max_words):
                phrases.append(tuple(current))
            current = []
    return phrases


def word_scores(phrases: Iterable[Sequence[str]]) -> dict[str, float]:
    """RAKE step 2: ``deg(w) / freq(w)`` of every word of the candidates.

    >>> word_scores([("scalar", "field"), ("field",)])
    {'scalar': 2.0, 'field': 1.5}
    """
    freq: Counter[str] = Counter()
    degree: Counter[str] = Counter()
    for phrase in phrases:
        for word in phrase:
            freq[word] += 1
            degree[word] += len(phrase)
    return {word: degree[word] / freq[word] for word in freq}


def _adjoined(text: str, stopwords: frozenset[str], max_words: int) -> list[tuple[str, ...]]:
    """RAKE's adjoining keywords: ``content+ stop content+`` seen at least twice."""
    seen: Counter[tuple[str, ...]] = Counter()
    for run in _runs(text, stopwords):
        flags = [_is_content(w, stopwords) for w in run]
        for i in range(1, len(run) - 1):
            if flags[i] or not flags[i - 1] or not flags[i + 1]:
                continue
            left = i - 1
            while left > 0 and flags[left - 1]:
                left -= 1
            right = i + 1
            while right + 1 < len(run) and flags[right + 1]:
                right += 1
            phrase = tuple(run[left : right + 1])
            if max_words <= 0 or len(phrase) <= max_words:
                seen[phrase] += 1
    return [phrase for phrase, count in seen.items() if count >= 2]


def keyword_scores(
    text: str, stopwords: frozenset[str] = STOPWORDS, max_words: int = 0
) -> dict[str, float]:
    """RAKE step 3: every candidate keyword (and adjoining keyword) with its score."""
    phrases = candidate_phrases(text, stopwords, max_words)
    scores = word_scores(phrases)
    out: dict[str, float] = {}
    for phrase in phrases:
        out[" ".join(phrase)] = sum(scores[w] for w in phrase)
    for phrase in _adjoined(text, stopwords, max_words):
        out[" ".join(phrase)] = sum(scores.get(w, 0.0) for w in phrase)
    return out


def rake_keywords(
    text: str,
    top: int | None = None,
    *,
    stopwords: frozenset[str] = STOPWORDS,
    max_words: int = 0,
) -> list[tuple[str, float]]:
    """RAKE: the ``top`` best keywords of ``text`` with their scores, best first.

    Args:
        text: prose, LaTeX allowed.
        top: how many (default: a third of the distinct content words, at least one).
        stopwords: the stop list (default :data:`STOPWORDS`).
        max_words: longest keyword kept (default 0: any length, as RAKE).

    Ties are broken alphabetically, so the result is deterministic.
    """
    scored = keyword_scores(text, stopwords, max_words)
    if not scored:
        return []
    if top is None:
        content = {w for phrase in scored for w in phrase.split() if w not in stopwords}
        top = max(1, len(content) // 3)
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[: max(0, top)]
