"""The local OpenSearch + Redis stack, assembled from Maven Central and Debian packages."""

from __future__ import annotations

from mathsearch.opensearch.stack.artifacts import Artifact, ArtifactLock, fetch
from mathsearch.opensearch.stack.assemble import assemble
from mathsearch.opensearch.stack.stack import REQUIRED_PLUGINS, Stack, cluster_status

__all__ = [
    "REQUIRED_PLUGINS",
    "Artifact",
    "ArtifactLock",
    "Stack",
    "assemble",
    "cluster_status",
    "fetch",
]
