"""What the live cluster's OpenSearch (and its k-NN / neural-search plugins) can do.

mathsearch runs on OpenSearch 2.19 and 3.x (the plugins' versions follow the core's). Where the
two differ, the code asks :class:`ClusterCapabilities` instead of assuming one:

* **the RRF pipeline**: neural-search 2.19 reads the rank constant from
  ``combination.parameters.rank_constant`` (and ignores it anywhere else); 3.x refuses that form
  ("supported parameters are [weights]") and reads ``combination.rank_constant``;
* **server-side z_score**: the ``normalization-processor`` of 3.x takes ``z_score`` (with
  ``arithmetic_mean``); 2.19 refuses it, so only client-side fusion offers it there;
* **derived vector source** (``index.knn.derived_source.enabled``, k-NN 2.19 and later; on by
  default from 3.0): the vectors are kept only in the vector files, not a second time as JSON in
  the stored ``_source``, and are put back into ``_source`` (from their float32 values) when a
  document is read, updated or copied. mathsearch sets it on every new k-NN index of 2.19 or
  later as ``MATHSEARCH_VECTOR_SOURCE`` says (``derived``, the default: about 1,330 B less per
  equation at 128 dimensions; ``stored``: off). Re-writes stay no-ops because the written
  vectors have at most 6 decimals (:func:`~mathsearch.runtime.embedder_base.written_vector`),
  which read back from float32 unchanged. Older clusters do not know the setting and get none.

Example::

    caps = ClusterCapabilities.of(client)   # one GET / per client, cached
    caps.major, caps.server_z_score
"""

from __future__ import annotations

import logging
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch

__all__ = ["ClusterCapabilities"]

logger = logging.getLogger(__name__)

_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")
_CACHE: weakref.WeakKeyDictionary[OpenSearch, ClusterCapabilities] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ClusterCapabilities:
    """The cluster's OpenSearch version and what follows from it (see the module docstring)."""

    version: tuple[int, int, int] = (2, 19, 1)

    @classmethod
    def parse(cls, number: str) -> ClusterCapabilities:
        """From a version string such as ``3.6.0`` or ``2.19.1-SNAPSHOT``.

        Raises:
            ValueError: not a version number.
        """
        match = _VERSION.match(number.strip())
        if not match:
            raise ValueError(f"not an OpenSearch version: {number!r}")
        major, minor, patch = match.groups()
        return cls((int(major), int(minor), int(patch or 0)))

    @classmethod
    def of(
        cls, client: OpenSearch, call: Callable[[Callable[[], Any]], Any] | None = None
    ) -> ClusterCapabilities:
        """The capabilities of ``client``'s cluster: one ``GET /``, cached per client.

        ``call`` runs the request (e.g. a searcher's typed-error wrapper); default: directly.
        """
        cached = _CACHE.get(client)
        if cached is not None:
            return cached
        info = call(client.info) if call is not None else client.info()
        caps = cls.parse(str(info["version"]["number"]))
        logger.debug("cluster runs OpenSearch %s", ".".join(map(str, caps.version)))
        _CACHE[client] = caps
        return caps

    @property
    def major(self) -> int:
        return self.version[0]

    @property
    def rrf_flat_rank_constant(self) -> bool:
        """The RRF ``score-ranker-processor`` takes ``combination.rank_constant`` (3.x), not
        ``combination.parameters.rank_constant`` (2.19)."""
        return self.major >= 3

    @property
    def server_z_score(self) -> bool:
        """The ``normalization-processor`` accepts ``z_score`` (3.x)."""
        return self.major >= 3

    @property
    def derived_vector_source(self) -> bool:
        """k-NN knows ``index.knn.derived_source.enabled`` (2.19 and later)."""
        return self.version >= (2, 19, 0)

    def index_settings(self, vector_source: str = "derived") -> dict[str, Any]:
        """Settings every new k-NN index of mathsearch adds on this cluster.

        Args:
            vector_source: ``derived`` or ``stored`` (``MATHSEARCH_VECTOR_SOURCE``).
        """
        if not self.derived_vector_source:
            return {}
        return {"index.knn.derived_source.enabled": vector_source == "derived"}
