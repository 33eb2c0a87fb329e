"""`mathsearch stack up | down | status`: the local OpenSearch cluster and Redis."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from mathsearch.core.errors import ClusterUnavailableError, StackError
from mathsearch.core.redact import redact_url
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.stack import node as node_mod
from mathsearch.stack import redis_server
from mathsearch.stack.artifacts import ArtifactLock
from mathsearch.stack.assemble import assemble
from mathsearch.stack.java import find_java_home
from mathsearch.workers.settings import WorkerSettings

logger = logging.getLogger(__name__)

REQUIRED_PLUGINS = ("opensearch-knn", "opensearch-neural-search")


class ClusterAuthenticationError(ClusterUnavailableError):
    """The cluster answered but refused the credentials (HTTP 401 / 403)."""


@dataclass
class Stack:
    """The local stack described by ``settings`` (ports from MATHSEARCH_OPENSEARCH_URL)."""

    settings: OpenSearchSettings
    redis_url: str

    @classmethod
    def from_env(cls) -> Stack:
        return cls(OpenSearchSettings.from_env(), WorkerSettings.from_env().redis_url)

    # -- layout -------------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.settings.state_dir / "stack.json"

    @property
    def run_as(self) -> str | None:
        return self.settings.stack_user if os.geteuid() == 0 else None

    def java(self, lock: ArtifactLock) -> Path:
        """The JDK the nodes run on (MATHSEARCH_JAVA_HOME, else the first that fits the lock)."""
        return find_java_home(lock.java_min, lock.java_max, self.settings.java_home)

    def running_size(self) -> int | None:
        """Number of nodes of the topology last brought up, None when no stack was started."""
        try:
            return int(json.loads(self.state_file.read_text())["nodes"])
        except (OSError, ValueError, KeyError):
            return None

    def nodes(self, size: int) -> list[node_mod.NodeSpec]:
        port = self.settings.port
        return [
            node_mod.NodeSpec(
                index=i,
                cluster_size=size,
                http_base=port,
                transport_base=port + 100,
                cluster_dir=self.settings.state_dir / f"cluster-{size}",
            )
            for i in range(1, size + 1)
        ]

    @property
    def redis(self) -> redis_server.RedisSpec:
        return redis_server.RedisSpec(self.redis_url, self.settings.state_dir / "redis")

    # -- commands -----------------------------------------------------------------------------
    def up(self, size: int = 1, with_redis: bool = True) -> list[str]:
        """Provision (first time) and start ``size`` nodes and Redis; wait until usable."""
        if size < 1:
            raise StackError("--nodes must be at least 1")
        if not self.settings.is_local:
            url = redact_url(self.settings.url)
            raise StackError(
                f"MATHSEARCH_OPENSEARCH_URL={url} is not a local http URL; "
                "`stack up` only manages the local node (use `stack status` for your cluster)"
            )
        messages = []
        current = self.running_size()
        if current is not None and current != size:
            logger.info("switching the local cluster from %d to %d node(s)", current, size)
            self.stop_nodes(current)
        lock = ArtifactLock.load()
        java = self.java(lock)
        home = assemble(self.settings.cache_dir, lock, java)
        if self.run_as:
            node_mod.ensure_system_user(self.run_as)
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps({"nodes": size, "home": str(home)}) + "\n")
        specs = self.nodes(size)
        for spec in specs:
            node_mod.start(spec, home, java, self.settings.heap, self.run_as)
        deadline = time.monotonic() + self.settings.stack_timeout
        for spec in specs:
            node_mod.wait_http(spec, deadline)
        self.wait_health(size, deadline)
        messages.append(
            f"OpenSearch {lock.opensearch_version}: {size} node(s) at "
            f"{self.node_settings(size).url} "
            f"(home {home})"
        )
        if with_redis:
            messages.append(redis_server.start(self.redis))
        return messages

    def node_settings(self, size: int | None = None) -> OpenSearchSettings:
        """Settings whose URL lists every node of the local cluster (so one may be down)."""
        size = size or self.running_size() or 1
        return dataclasses.replace(self.settings, url=",".join(s.url for s in self.nodes(size)))

    def wait_health(self, size: int, deadline: float) -> dict:
        from mathsearch.opensearch.client import connect

        client = connect(self.node_settings(size))
        last: dict | str = "no answer"
        while time.monotonic() < deadline:
            try:
                last = client.cluster.health()
                if last["status"] in {"green", "yellow"} and last["number_of_nodes"] >= size:
                    return last
            except Exception as exc:
                last = repr(exc)
            time.sleep(1.0)
        raise StackError(f"cluster did not reach {size} node(s) in time (last answer: {last})")

    def stop_nodes(self, size: int) -> int:
        return sum(node_mod.stop(spec) for spec in reversed(self.nodes(size)))

    def down(self) -> list[str]:
        """Stop every node of the current topology and the Redis we started."""
        messages = []
        size = self.running_size()
        if size is not None:
            stopped = self.stop_nodes(size)
            messages.append(f"stopped {stopped} OpenSearch node(s)")
            self.state_file.unlink(missing_ok=True)
        else:
            messages.append("no local OpenSearch was running")
        messages.append("stopped Redis" if redis_server.stop(self.redis) else "no Redis of ours")
        return messages

    def node_stop(self, index: int) -> str:
        spec = self._node(index)
        return f"{spec.name} stopped" if node_mod.stop(spec) else f"{spec.name} was not running"

    def node_start(self, index: int) -> str:
        spec = self._node(index)
        state = json.loads(self.state_file.read_text())
        java = self.java(ArtifactLock.load())
        node_mod.start(spec, Path(state["home"]), java, self.settings.heap, self.run_as)
        node_mod.wait_http(spec, time.monotonic() + self.settings.stack_timeout)
        return f"{spec.name} started on {spec.url}"

    def _node(self, index: int) -> node_mod.NodeSpec:
        size = self.running_size()
        if size is None:
            raise StackError("no local stack is up; run `mathsearch stack up` first")
        if not 1 <= index <= size:
            raise StackError(f"node {index} does not exist (the local cluster has {size})")
        return self.nodes(size)[index - 1]

    def status(self) -> dict:
        """Health, nodes, plugins and versions of the cluster at the URL, plus Redis."""
        settings = self.node_settings() if self.settings.is_local else self.settings
        return cluster_status(settings) | {"redis": self.redis_status()}

    def redis_status(self) -> dict:
        spec = self.redis
        version = redis_server.ping(spec.host, spec.port)
        return {"url": redact_url(spec.url), "ok": version is not None, "version": version}


def cluster_status(settings: OpenSearchSettings) -> dict:
    """Query any cluster (local or not) for what `stack status` prints.

    Raises :class:`ClusterAuthenticationError` when the credentials are refused and
    :class:`ClusterUnavailableError` otherwise; neither message holds the password.
    """
    from opensearchpy.exceptions import AuthenticationException, AuthorizationException, SSLError

    from mathsearch.opensearch.client import connect

    client = connect(settings)
    url = redact_url(settings.url)
    try:
        health = client.cluster.health()
        info = client.info()
        nodes = client.cat.nodes(format="json", h="name,ip,version,node.role,heap.percent,cm")
        plugins = client.cat.plugins(format="json", h="name,component,version")
    except (AuthenticationException, AuthorizationException) as exc:
        raise ClusterAuthenticationError(
            f"OpenSearch at {url} refused the credentials of user "
            f"{settings.user or '(none)'} (HTTP {exc.status_code}); check "
            "MATHSEARCH_OPENSEARCH_USER and MATHSEARCH_OPENSEARCH_PASSWORD[_FILE]"
        ) from None
    except SSLError as exc:
        raise ClusterUnavailableError(
            f"TLS with OpenSearch at {url} failed ({_ssl_reason(exc)}); "
            "set MATHSEARCH_OPENSEARCH_CA_FILE to the CA that signed the cluster's certificate"
        ) from None
    except Exception as exc:
        raise ClusterUnavailableError(
            f"OpenSearch at {url} does not answer ({type(exc).__name__}); "
            "start it with `mathsearch stack up` or set MATHSEARCH_OPENSEARCH_URL"
        ) from exc
    by_plugin: dict[str, dict] = {}
    for row in plugins:
        entry = by_plugin.setdefault(row["component"], {"version": row["version"], "nodes": []})
        entry["nodes"].append(row["name"])
    missing = [name for name in REQUIRED_PLUGINS if name not in by_plugin]
    return {
        "url": url,
        "cluster_name": health["cluster_name"],
        "health": health["status"],
        "opensearch_version": info["version"]["number"],
        "number_of_nodes": health["number_of_nodes"],
        "nodes": sorted(nodes, key=lambda n: n["name"]),
        "plugins": by_plugin,
        "missing_plugins": missing,
    }


def _ssl_reason(exc: Exception) -> str:
    """``CERTIFICATE_VERIFY_FAILED``-style reason of an SSL error, never a URL or header."""
    text = str(exc)
    for reason in ("CERTIFICATE_VERIFY_FAILED", "WRONG_VERSION_NUMBER", "hostname mismatch"):
        if reason in text:
            return reason
    return type(exc).__name__
