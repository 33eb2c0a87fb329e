"""The symbol vocabularies of the 256-d one-hot node features (KDD 2020 seed, section 3.2).

Three vocabularies, each fitted by frequency over a corpus of :class:`MathNode` trees, most
frequent first (ties broken by the symbol string, so a fit is deterministic), and each reserving
its LAST slot for "unknown":

==========  =====  =================================================================
segment     slots  symbols
==========  =====  =================================================================
tags        32     element local names (``mi``, ``mrow``, ...) and ``#text`` for the
                   one-character text leaves (31 fitted + unknown)
attributes  32     ``key=value`` strings (31 fitted + unknown)
characters  192    single characters of token text, NFC (191 fitted + unknown)
==========  =====  =================================================================

Attribute symbols follow the authors' code (Whadup/arxiv_learning, ``load_mathml.py``): every
attribute ``key=value`` except ``xmlns``/``xmlns:*`` and the HTML-ish ``class``, ``style`` and
``id``; values in ``em`` are rounded to 0.1em (``0.2778em`` -> ``0.3em``, ``1em`` -> ``1.0em``).
An element with several attribute symbols gets the one with the best vocabulary rank (the most
frequent); symbols outside the vocabulary map to the unknown slot, an element without attributes
to "none" (id -1, an all-zero segment). Fitting counts every symbol of every element.

The :attr:`Vocabulary.content_hash` (SHA-256 of the canonical JSON of the three lists and the sizes)
is what a model card records; the runtime refuses a model whose hash differs (docs/architecture.md,
rule 2). :func:`default_vocabulary` loads ``indexer/resources/vocabulary-v1.json``, which the
project owner produces with :func:`fit_default` over the hep-th corpus.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

from mathsearch.indexer.errors import VocabularyError
from mathsearch.indexer.mathml_tree import MathNode

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_SIZES",
    "DEFAULT_VOCABULARY_PATH",
    "TEXT_TAG",
    "Vocabulary",
    "attribute_symbols",
    "default_vocabulary",
    "fit_default",
    "leaf_text",
]

#: Slots of the tag, attribute and character segments (unknown slot included).
DEFAULT_SIZES: tuple[int, int, int] = (32, 32, 192)
#: The pseudo-tag of one-character text leaves.
TEXT_TAG = "#text"
DEFAULT_VOCABULARY_PATH = Path(__file__).parent / "resources" / "vocabulary-v1.json"

_FORMAT = "mathsearch-vocabulary"
_SKIPPED_KEYS = frozenset({"xmlns", "class", "style", "id"})
_CACHE_LIMIT = 65_536


def _symbol(key: str, value: str) -> str | None:
    if key in _SKIPPED_KEYS or key.startswith("xmlns:"):
        return None
    if value.endswith("em"):
        try:
            number = float(value[:-2])
        except ValueError:
            pass
        else:
            if math.isfinite(number):
                value = f"{round(number, 1) + 0.0}em"  # + 0.0 turns -0.0 into 0.0
    return f"{key}={value}"


def leaf_text(text: str | None) -> str | None:
    """The text whose characters become leaves: XML whitespace trimmed, NFC; None when empty.

    Every consumer of token text (vocabulary fit, graph, BoW, tokens) goes through this, so
    trees from any producer featurise alike.
    """
    if not text:
        return None
    text = text.strip(" \t\n\r")
    if not text:
        return None
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def attribute_symbols(attrs: Mapping[str, str] | None) -> list[str]:
    """The attribute symbols of one element, in attribute order.

    >>> attribute_symbols({"width": "0.2778em", "class": "x", "mathvariant": "bold"})
    ['width=0.3em', 'mathvariant=bold']
    """
    if not attrs:
        return []
    return [s for s in (_symbol(k, v) for k, v in attrs.items()) if s is not None]


def _top(counter: Counter[str], keep: int) -> list[str]:
    return [s for s, _ in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:keep]]


class Vocabulary:
    """Tag, attribute and character vocabularies (ordered, most frequent first, no unknown)."""

    def __init__(
        self,
        tags: Iterable[str],
        attributes: Iterable[str],
        characters: Iterable[str],
        sizes: tuple[int, int, int] = DEFAULT_SIZES,
    ) -> None:
        self.tags = list(tags)
        self.attributes = list(attributes)
        self.characters = list(characters)
        self.sizes = tuple(int(size) for size in sizes)
        if len(self.sizes) != 3 or min(self.sizes) < 1:
            raise VocabularyError(f"sizes must be three positive slot counts, not {sizes!r}")
        for name, symbols, size in zip(
            ("tags", "attributes", "characters"),
            (self.tags, self.attributes, self.characters),
            self.sizes,
            strict=True,
        ):
            if len(symbols) > size - 1:
                raise VocabularyError(
                    f"{len(symbols)} {name} do not fit {size} slots (one is kept for unknown)"
                )
            if len(set(symbols)) != len(symbols) or not all(
                isinstance(s, str) and s for s in symbols
            ):
                raise VocabularyError(f"{name} must be distinct non-empty strings")
        bad = [c for c in self.characters if len(c) != 1]
        if bad:
            raise VocabularyError(f"characters must be single characters, not {bad[:3]!r}")
        self._tag_index = {s: i for i, s in enumerate(self.tags)}
        self._attr_index = {s: i for i, s in enumerate(self.attributes)}
        self._char_index = {s: i for i, s in enumerate(self.characters)}
        self._attr_cache: dict[tuple[tuple[str, str], ...], int] = {}
        self.content_hash = hashlib.sha256(self._canonical().encode("utf-8")).hexdigest()

    # -- identity ---------------------------------------------------------------------------

    def _canonical(self) -> str:
        data = {
            "attributes": self.attributes,
            "characters": self.characters,
            "sizes": list(self.sizes),
            "tags": self.tags,
        }
        return json.dumps(data, sort_keys=True, ensure_ascii=True, separators=(",", ":"))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocabulary):
            return NotImplemented
        return self.content_hash == other.content_hash

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Vocabulary({len(self.tags)} tags, {len(self.attributes)} attributes, "
            f"{len(self.characters)} characters, sizes={self.sizes}, "
            f"hash={self.content_hash[:12]})"
        )

    @property
    def unknown_tag(self) -> int:
        return self.sizes[0] - 1

    @property
    def unknown_attribute(self) -> int:
        return self.sizes[1] - 1

    @property
    def unknown_char(self) -> int:
        return self.sizes[2] - 1

    @property
    def dim(self) -> int:
        """Width of a node feature vector (256 with the default sizes)."""
        return sum(self.sizes)

    # -- lookups ----------------------------------------------------------------------------

    def tag_id(self, tag: str) -> int:
        """Slot of a tag (``#text`` for leaves); unknown tags get the last slot."""
        return self._tag_index.get(tag, self.sizes[0] - 1)

    def char_id(self, ch: str) -> int:
        """Slot of one character; unknown characters get the last slot."""
        return self._char_index.get(ch, self.sizes[2] - 1)

    def attribute_id(self, attrs: Mapping[str, str] | None) -> int:
        """Slot of an element's best-ranked attribute symbol; -1 when it has none."""
        if not attrs:
            return -1
        key = tuple(attrs.items())
        found = self._attr_cache.get(key)
        if found is not None:
            return found
        symbols = attribute_symbols(attrs)
        if not symbols:
            found = -1
        else:
            index = self._attr_index
            ranks = [index[s] for s in symbols if s in index]
            found = min(ranks) if ranks else self.sizes[1] - 1
        if len(self._attr_cache) < _CACHE_LIMIT:
            self._attr_cache[key] = found
        return found

    def tag_symbol(self, slot: int) -> str | None:
        """The tag of a slot (None for the unknown slot)."""
        return self.tags[slot] if 0 <= slot < len(self.tags) else None

    def attribute_symbol(self, slot: int) -> str | None:
        return self.attributes[slot] if 0 <= slot < len(self.attributes) else None

    def char_symbol(self, slot: int) -> str | None:
        return self.characters[slot] if 0 <= slot < len(self.characters) else None

    # -- fitting and files ------------------------------------------------------------------

    @classmethod
    def fit(
        cls, trees: Iterable[MathNode], sizes: tuple[int, int, int] = DEFAULT_SIZES
    ) -> Vocabulary:
        """Count tags, attribute symbols and characters over all nodes and keep the top ones."""
        tags: Counter[str] = Counter()
        attributes: Counter[str] = Counter()
        characters: Counter[str] = Counter()
        count = 0
        for tree in trees:
            count += 1
            for node in tree.iter():
                tags[node.tag] += 1
                if node.attrs:
                    attributes.update(attribute_symbols(node.attrs))
                text = leaf_text(node.text)
                if text:
                    characters.update(text)
                    tags[TEXT_TAG] += len(text)
        vocab = cls(
            _top(tags, sizes[0] - 1),
            _top(attributes, sizes[1] - 1),
            _top(characters, sizes[2] - 1),
            sizes,
        )
        logger.info(
            "fitted %r on %d trees (%d tags, %d attribute symbols, %d characters seen)",
            vocab,
            count,
            len(tags),
            len(attributes),
            len(characters),
        )
        return vocab

    def to_dict(self) -> dict[str, object]:
        return {
            "format": _FORMAT,
            "version": 1,
            "sizes": list(self.sizes),
            "tags": self.tags,
            "attributes": self.attributes,
            "characters": self.characters,
            "content_hash": self.content_hash,
        }

    def save(self, path: str | Path) -> Path:
        """Write the vocabulary as JSON (with its content hash)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), ensure_ascii=False, indent=1)
        path.write_text(text + "\n", encoding="utf-8")
        return path

    @classmethod
    def from_dict(cls, data: object) -> Vocabulary:
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise VocabularyError("not a mathsearch vocabulary (missing format marker)")
        try:
            vocab = cls(data["tags"], data["attributes"], data["characters"], data["sizes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise VocabularyError(f"malformed vocabulary: {exc!r}") from exc
        stored = data.get("content_hash")
        if stored != vocab.content_hash:
            raise VocabularyError(
                f"vocabulary content hash mismatch: stored {stored!r}, "
                f"content gives {vocab.content_hash!r} (the file was edited or damaged)"
            )
        return vocab

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        """Read a vocabulary written by :meth:`save`, verifying its content hash."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise VocabularyError(f"vocabulary file {path} does not exist") from exc
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise VocabularyError(f"cannot read vocabulary {path}: {exc}") from exc
        return cls.from_dict(data)


def fit_default(trees: Iterable[MathNode]) -> Vocabulary:
    """Fit the default-sized (32/32/192) vocabulary; the caller saves it where it belongs."""
    return Vocabulary.fit(trees, DEFAULT_SIZES)


@lru_cache(maxsize=1)
def default_vocabulary() -> Vocabulary:
    """The versioned vocabulary shipped in ``indexer/resources/vocabulary-v1.json``."""
    if not DEFAULT_VOCABULARY_PATH.exists():
        raise VocabularyError(
            f"the default vocabulary {DEFAULT_VOCABULARY_PATH} is missing: fit one with "
            "mathsearch.indexer.vocabulary.fit_default(trees) over the hep-th corpus and save() "
            "it there"
        )
    return Vocabulary.load(DEFAULT_VOCABULARY_PATH)
