"""The local OpenSearch + Redis stack, assembled from Maven Central and Debian packages, and the
demo that runs on it (``run_demo``, loaded on first use)."""

from __future__ import annotations

from mathsearch.stack.artifacts import Artifact, ArtifactLock, fetch
from mathsearch.stack.assemble import assemble
from mathsearch.stack.stack import REQUIRED_PLUGINS, Stack, cluster_status

__all__ = [
    "REQUIRED_PLUGINS",
    "Artifact",
    "ArtifactLock",
    "Stack",
    "assemble",
    "cluster_status",
    "fetch",
    "run_demo",
]


def __getattr__(name: str) -> object:
    if name == "run_demo":
        from mathsearch.stack.demo import run_demo

        return run_demo
    raise AttributeError(f"module 'mathsearch.stack' has no attribute {name!r}")
