"""`mathsearch stack up | down | status`: the local OpenSearch cluster and Redis."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mathsearch.core.cluster_faults import cluster_fault
from mathsearch.core.errors import ClusterUnavailableError, StackError
from mathsearch.core.redact import redact_url
from mathsearch.opensearch.settings import OpenSearchSettings
from mathsearch.stack import node as node_mod
from mathsearch.stack import redis_server
from mathsearch.stack.artifacts import ArtifactLock, major_version
from mathsearch.stack.assemble import assemble
from mathsearch.stack.java import find_java_home
from mathsearch.workers.settings import WorkerSettings

logger = logging.getLogger(__name__)

REQUIRED_PLUGINS = ("opensearch-knn", "opensearch-neural-search")


class ClusterAuthenticationError(ClusterUnavailableError):
    """The cluster answered but refused the credentials (HTTP 401 / 403)."""


@dataclass(frozen=True)
class RunningStack:
    """What ``stack.json`` records of the topology last brought up."""

    nodes: int
    home: str
    #: None for a state file written before `stack up --version` existed (a default-lock node).
    version: str | None


def cluster_dirname(size: int, version: str | None) -> str:
    """The folder (under the state dir) of a ``size``-node cluster of OpenSearch ``version``.

    2.x keeps ``cluster-<size>`` (the folder of every node started before versions could be
    chosen); a later major gets ``cluster-<size>-os<major>``, because its data cannot be read back
    by an older major: switching versions never points a node at another major's data.
    """
    major = major_version(version) if version else 2
    return f"cluster-{size}" if major <= 2 else f"cluster-{size}-os{major}"


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

    def lock(self, version: str | None = None) -> ArtifactLock:
        """The artifact lock of ``version``, else of MATHSEARCH_OPENSEARCH_VERSION, else the
        default lock."""
        return ArtifactLock.load(version or self.settings.opensearch_version)

    def running(self) -> RunningStack | None:
        """The topology last brought up (``stack.json``), None when no stack was started."""
        try:
            state = json.loads(self.state_file.read_text())
            return RunningStack(int(state["nodes"]), str(state["home"]), state.get("version"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def running_size(self) -> int | None:
        """Number of nodes of the topology last brought up, None when no stack was started."""
        running = self.running()
        return running.nodes if running else None

    def running_version(self) -> str | None:
        """OpenSearch version of the topology last brought up (None: none, or the default's)."""
        running = self.running()
        return running.version if running else None

    def nodes(self, size: int, version: str | None = None) -> list[node_mod.NodeSpec]:
        """The node specs of a ``size``-node cluster of OpenSearch ``version`` (None: 2.x)."""
        port = self.settings.port
        return [
            node_mod.NodeSpec(
                index=i,
                cluster_size=size,
                http_base=port,
                transport_base=port + 100,
                cluster_dir=self.settings.state_dir / cluster_dirname(size, version),
            )
            for i in range(1, size + 1)
        ]

    @property
    def redis(self) -> redis_server.RedisSpec:
        return redis_server.RedisSpec(self.redis_url, self.settings.state_dir / "redis")

    # -- commands -----------------------------------------------------------------------------
    def up(self, size: int = 1, with_redis: bool = True, version: str | None = None) -> list[str]:
        """Provision (first time) and start ``size`` nodes of OpenSearch ``version`` (see
        :meth:`lock`) and Redis; wait until usable."""
        if size < 1:
            raise StackError("--nodes must be at least 1")
        if not self.settings.is_local:
            url = redact_url(self.settings.url)
            raise StackError(
                f"MATHSEARCH_OPENSEARCH_URL={url} is not a local http URL; "
                "`stack up` only manages the local node (use `stack status` for your cluster)"
            )
        messages = []
        lock = self.lock(version)
        wanted = lock.opensearch_version
        current = self.running()
        if current is not None:
            was = current.version or ArtifactLock.load().opensearch_version
            if (current.nodes, was) != (size, wanted):
                logger.info(
                    "switching the local cluster from %d node(s) of %s to %d of %s",
                    current.nodes,
                    was,
                    size,
                    wanted,
                )
                self.stop_nodes(current.nodes, current.version)
        java = self.java(lock)
        home = assemble(self.settings.cache_dir, lock, java)
        if self.run_as:
            node_mod.ensure_system_user(self.run_as)
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        state = {"nodes": size, "home": str(home), "version": wanted}
        self.state_file.write_text(json.dumps(state) + "\n")
        specs = self.nodes(size, wanted)
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
        urls = ",".join(s.url for s in self.nodes(size, self.running_version()))
        return dataclasses.replace(self.settings, url=urls)

    def wait_health(self, size: int, deadline: float) -> dict:
        from mathsearch.opensearch.client import connect

        client = connect(self.node_settings(size))
        last: dict | str = "no answer"
        while time.monotonic() < deadline:
            try:
                health: dict[str, Any] = client.cluster.health()  # the cluster's JSON
                last = health
                if health["status"] in {"green", "yellow"} and health["number_of_nodes"] >= size:
                    return health
            except Exception as exc:
                last = repr(exc)
            time.sleep(1.0)
        raise StackError(f"cluster did not reach {size} node(s) in time (last answer: {last})")

    def stop_nodes(self, size: int, version: str | None = None) -> int:
        """Stop the nodes of a ``size``-node cluster of ``version``; the number stopped."""
        return sum(node_mod.stop(spec) for spec in reversed(self.nodes(size, version)))

    def down(self) -> list[str]:
        """Stop every node of the current topology and the Redis we started."""
        messages = []
        running = self.running()
        if running is not None:
            stopped = self.stop_nodes(running.nodes, running.version)
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
        running = self.running()
        if running is None:
            raise StackError("no local stack is up; run `mathsearch stack up` first")
        java = self.java(ArtifactLock.load(running.version))
        node_mod.start(spec, Path(running.home), java, self.settings.heap, self.run_as)
        node_mod.wait_http(spec, time.monotonic() + self.settings.stack_timeout)
        return f"{spec.name} started on {spec.url}"

    def _node(self, index: int) -> node_mod.NodeSpec:
        running = self.running()
        if running is None:
            raise StackError("no local stack is up; run `mathsearch stack up` first")
        if not 1 <= index <= running.nodes:
            raise StackError(f"node {index} does not exist (the local cluster has {running.nodes})")
        return self.nodes(running.nodes, running.version)[index - 1]

    def status(self) -> dict:
        """Health, nodes, plugins and versions of the cluster at the URL, plus Redis; for a
        local stack also what ``stack up`` built (``local``: version, nodes, home)."""
        settings = self.node_settings() if self.settings.is_local else self.settings
        status = cluster_status(settings) | {"redis": self.redis_status()}
        running = self.running() if self.settings.is_local else None
        if running is not None:
            status["local"] = {
                "version": running.version or ArtifactLock.load().opensearch_version,
                "nodes": running.nodes,
                "home": running.home,
            }
        return status

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
        line = cluster_fault(exc, url)
        raise ClusterUnavailableError(
            line
            or f"OpenSearch at {url} does not answer ({type(exc).__name__}): "
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
