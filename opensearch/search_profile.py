"""Search profiles: a named set of ranking parameters, written by ``tune``, loaded by ``--profile``.

A profile is a JSON file holding the parameters of
:class:`~mathsearch.opensearch.search_request.SearchRequest`
that shape the ranking (mode, alpha, window, depth, normalisation, combination, rank constant,
k, max_df, the encoders whose fields it searches, when not the index's default one, and the
second stage's ``rerank`` encoders, window and alpha) plus
where they came from (``source``: e.g. the tune report and the metric it
maximised). ``mathsearch search --profile P`` and ``mathsearch serve --profile P`` start from the
profile; flags or request fields given explicitly still win. Without ``--profile`` they (and the
demo) start from :meth:`SearchProfile.default`: ``MATHSEARCH_SEARCH_PROFILE`` when set, else the
shipped ``opensearch/profiles/default.json`` - the best configuration of a tuning run of the
default model on its validation papers (its report beside it), never on evaluation topics.

Example::

    profile = SearchProfile(mode=Mode.FUSION, alpha=0.3, normalization=Normalization.L2)
    profile.save("best.json")
    request = SearchProfile.load("best.json").request(r"x^2 + y^2", k=5)
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mathsearch.core.errors import ConfigurationError, QueryError
from mathsearch.opensearch.fusion import Combination, Normalization
from mathsearch.opensearch.queries import Mode
from mathsearch.opensearch.search_request import SearchRequest

logger = logging.getLogger(__name__)

PROFILE_FORMAT = "mathsearch-search-profile/1"
#: The shipped default profile (see the module docstring).
DEFAULT_PROFILE_PATH = Path(__file__).resolve().parent / "profiles" / "default.json"
#: Environment variable naming another default profile file.
PROFILE_ENV = "MATHSEARCH_SEARCH_PROFILE"


@dataclass(frozen=True)
class SearchProfile:
    """Ranking parameters with :class:`SearchRequest`'s defaults; ``source`` says who chose them."""

    # one set of defaults: the request's
    mode: Mode = SearchRequest.mode
    k: int = SearchRequest.k
    alpha: float = SearchRequest.alpha
    window: int = SearchRequest.window
    depth: int = SearchRequest.depth
    normalization: Normalization = SearchRequest.normalization
    combination: Combination = SearchRequest.combination
    rank_constant: int = SearchRequest.rank_constant
    max_df: float | None = SearchRequest.max_df
    max_terms: int | None = SearchRequest.max_terms
    #: the encoders whose vector fields every search uses (families or ``.onnx`` paths, as
    #: ``search --encoders``); empty: the index's default field
    encoders: tuple[str, ...] = ()
    #: the second stage's encoders (``search --rerank``): the top ``rerank_window`` hits of a
    #: hybrid mode re-ranked with their vectors at query time; empty: no second stage
    rerank: tuple[str, ...] = ()
    rerank_window: int = SearchRequest.rerank_window
    rerank_alpha: float = SearchRequest.rerank_alpha
    #: the first stage of a query with variables (``search --wildcard-mode``)
    wildcard_mode: str = SearchRequest.wildcard_mode
    source: dict[str, Any] = field(default_factory=dict, compare=False)

    def request(self, latex: str, **overrides: Any) -> SearchRequest:
        """A :class:`SearchRequest` for ``latex`` with this profile's parameters.

        ``overrides`` (any :class:`SearchRequest` field) replace the profile's values; window
        and depth are raised to ``k`` when ``k`` exceeds them. A ``vector_field`` or
        ``vector_fields`` override without ``encoders`` searches that field, not the profile's
        encoders.
        """
        values: dict[str, Any] = {name: getattr(self, name) for name in RANKING_FIELDS}
        if self.encoders and not (overrides.get("vector_field") or overrides.get("vector_fields")):
            values["encoders"] = self.encoders
        if self.rerank:
            values["rerank"] = self.rerank
        values.update(overrides)
        k = int(values.get("k", self.k))
        values["window"] = max(int(values["window"]), k)
        values["depth"] = max(int(values["depth"]), k)
        return SearchRequest(latex=latex, **values)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["mode"] = self.mode.value
        data["normalization"] = self.normalization.value
        data["combination"] = self.combination.value
        if self.encoders:
            data["encoders"] = list(self.encoders)
        else:  # a one-field profile reads as before
            del data["encoders"]
        if self.wildcard_mode == SearchRequest.wildcard_mode:
            del data["wildcard_mode"]  # the default reads as before
        if self.rerank:
            data["rerank"] = list(self.rerank)
        else:  # a profile without a second stage reads as before
            for name in ("rerank", "rerank_window", "rerank_alpha"):
                del data[name]
        return {"format": PROFILE_FORMAT, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchProfile:
        """Parse a profile; unknown keys or bad values raise :class:`ConfigurationError`."""
        if not isinstance(data, dict):
            raise ConfigurationError("a search profile is a JSON object")
        data = {key: value for key, value in data.items() if key != "format"}
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ConfigurationError(f"unknown search profile keys: {', '.join(unknown)}")
        encoders = data.get("encoders", ())
        if not isinstance(encoders, (list, tuple)) or not all(
            isinstance(name, str) and name.strip() for name in encoders
        ):
            raise ConfigurationError(
                f"bad search profile: encoders must be names, not {encoders!r}"
            )
        data["encoders"] = tuple(encoders)
        rerank = data.get("rerank", ())
        if not isinstance(rerank, (list, tuple)) or not all(
            isinstance(name, str) and name.strip() for name in rerank
        ):
            raise ConfigurationError(f"bad search profile: rerank must be names, not {rerank!r}")
        data["rerank"] = tuple(rerank)
        try:
            profile = cls(**data)
            profile = replace(
                profile,
                mode=Mode(profile.mode),
                normalization=Normalization(profile.normalization),
                combination=Combination(profile.combination),
            )
            profile.request("x").validate()
        except (TypeError, ValueError, QueryError) as exc:
            raise ConfigurationError(f"bad search profile: {exc}") from exc
        return profile

    @classmethod
    def default(cls) -> SearchProfile:
        """``MATHSEARCH_SEARCH_PROFILE``, else the shipped default profile, else the
        request's defaults (a checkout without the file).

        Raises:
            ConfigurationError: the named profile cannot be read or is not a profile.
        """
        named = os.environ.get(PROFILE_ENV, "").strip()
        if named:
            return cls.load(named)
        if DEFAULT_PROFILE_PATH.is_file():
            return cls.load(DEFAULT_PROFILE_PATH)
        return cls()

    @property
    def label(self) -> str:
        """Where the profile came from, in a few words (for logs and the demo)."""
        origin = self.source.get("name") or self.source.get("report") or "request defaults"
        second = ""
        if self.rerank and self.rerank_window:
            names = ", ".join(_short(name) for name in self.rerank)
            second = f"; rerank top {self.rerank_window} by {names}, alpha {self.rerank_alpha:g}"
        return f"{origin} ({self.mode.value}, alpha {self.alpha:g}{second})"

    @classmethod
    def load(cls, path: str | Path) -> SearchProfile:
        """Read a profile file written by :meth:`save` (or by ``mathsearch tune``)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigurationError(f"cannot read search profile {path}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"search profile {path} is not JSON: {exc}") from exc
        try:
            return cls.from_dict(data)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{path}: {exc}") from exc

    def save(self, path: str | Path) -> Path:
        """Write the profile as JSON; returns the path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        logger.info("wrote search profile %s", target)
        return target


#: The ranking parameters a profile holds (every one a :class:`SearchRequest` field), the names
#: of the matching ``search`` flags and ``POST /search`` fields.
#: (``encoders`` is a profile field too, but its flag and body field take their own forms.)
RANKING_FIELDS = tuple(
    f.name for f in fields(SearchProfile) if f.name not in {"source", "encoders", "rerank"}
)


def _short(name: str) -> str:
    """An encoder's name for a label: a model file's stem, a family as it is.

    >>> _short("export/models/gcn-v8.onnx"), _short("gcn")
    ('gcn-v8', 'gcn')
    """
    return Path(name).stem if name.endswith(".onnx") else name
