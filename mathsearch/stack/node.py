"""One local OpenSearch node: its configuration, its process, its HTTP port."""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mathsearch.core.errors import StackError
from mathsearch.stack.process import terminate

logger = logging.getLogger(__name__)

CLUSTER_NAME = "mathsearch-local"
MAIN_CLASS = b"org.opensearch.bootstrap.OpenSearch"

#: jvm.options lines every node gets: G1, the temp folder, heap dumps and GC logs in the node's
#: log folder, a fixed heap.
_JVM_COMMON = """\
-XX:+UseG1GC
-XX:G1ReservePercent=25
-XX:InitiatingHeapOccupancyPercent=30
-Djava.io.tmpdir=${{OPENSEARCH_TMPDIR}}
-XX:+HeapDumpOnOutOfMemoryError
-XX:HeapDumpPath={logs}
-XX:ErrorFile={logs}/hs_err_pid%p.log
-Xlog:gc*:file={logs}/gc.log:utctime,pid,tags:filecount=4,filesize=16m
-Xms{heap}
-Xmx{heap}
20-:--add-modules=jdk.incubator.vector
"""

#: jvm.options of a 2.x node: its sandbox is the Java security manager (Java 18+ must allow it;
#: Java 24+ has none, hence the lock's Java 11-21).
JVM_OPTIONS = (
    _JVM_COMMON
    + """\
18-:-Djava.security.manager=allow
-Djava.util.concurrent.ForkJoinPool.common.threadFactory=org.opensearch.secure_sm.SecuredForkJoinWorkerThreadFactory
"""
)

#: jvm.options of a 3.x node (Java 21+): the security manager is gone; the distribution's
#: ``agent/opensearch-agent.jar`` (a Java agent) enforces the plugin policies instead. Its path is
#: absolute because the node's working folder is not the home. The rest follows the 3.x
#: distribution's own config/jvm.options.
JVM_OPTIONS_AGENT = (
    _JVM_COMMON
    + """\
-javaagent:{agent}
--add-opens=java.base/java.nio=org.apache.arrow.memory.core,ALL-UNNAMED
-Dorg.apache.lucene.store.MMapDirectory.sharedArenaMaxPermits=1
25-:-XX:+UseCompactObjectHeaders
"""
)

#: Where a 3.x distribution keeps its security agent (absent from 2.x).
AGENT_JAR = Path("agent") / "opensearch-agent.jar"


def jvm_options(home: Path, logs: Path, heap: str) -> str:
    """The node's jvm.options: the agent flavour when ``home`` ships the 3.x security agent,
    the security-manager one (2.x) otherwise."""
    agent = home / AGENT_JAR
    if agent.is_file():
        return JVM_OPTIONS_AGENT.format(logs=logs, heap=heap, agent=agent)
    return JVM_OPTIONS.format(logs=logs, heap=heap)


@dataclass(frozen=True)
class NodeSpec:
    """Node ``index`` (1-based) of a local cluster of ``cluster_size`` nodes on loopback."""

    index: int
    cluster_size: int
    http_base: int
    transport_base: int
    cluster_dir: Path
    scheme: str = "http"
    extra_yml: tuple[str, ...] = ()
    cluster_name: str = CLUSTER_NAME

    @property
    def name(self) -> str:
        return f"node-{self.index}"

    @property
    def http_port(self) -> int:
        return self.http_base + self.index - 1

    @property
    def transport_port(self) -> int:
        return self.transport_base + self.index - 1

    @property
    def folder(self) -> Path:
        return self.cluster_dir / self.name

    @property
    def pid_file(self) -> Path:
        return self.folder / "opensearch.pid"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.http_port}"

    def opensearch_yml(self) -> str:
        lines = [
            f"cluster.name: {self.cluster_name}",
            f"node.name: {self.name}",
            "network.host: 127.0.0.1",
            f"http.port: {self.http_port}",
            f"transport.port: {self.transport_port}",
            f"path.data: {self.folder / 'data'}",
            f"path.logs: {self.folder / 'logs'}",
            "action.destructive_requires_name: false",
            # The local stack shares its disk with everything else on the machine: watermarks
            # in free bytes, not percent, so a large, mostly full disk does not turn the
            # indexes read-only while gigabytes are still free.
            "cluster.routing.allocation.disk.watermark.low: 3gb",
            "cluster.routing.allocation.disk.watermark.high: 2gb",
            "cluster.routing.allocation.disk.watermark.flood_stage: 1gb",
        ]
        if self.cluster_size == 1:
            lines.append("discovery.type: single-node")
        else:
            peers = ", ".join(
                f'"127.0.0.1:{self.transport_base + i}"' for i in range(self.cluster_size)
            )
            names = ", ".join(f'"node-{i + 1}"' for i in range(self.cluster_size))
            lines += [
                f"discovery.seed_hosts: [{peers}]",
                f"cluster.initial_cluster_manager_nodes: [{names}]",
            ]
        return "\n".join([*lines, *self.extra_yml]) + "\n"


def read_pid(pid_file: Path) -> int | None:
    """The pid in ``pid_file`` when that process is an OpenSearch node still running."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return pid if MAIN_CLASS in cmdline else None


def find_pid(spec: NodeSpec) -> int | None:
    """The node's pid: from its pid file, else by its config path on the JVM's command line.

    ``bin/opensearch -d`` returns before the pid file is written, so a node that is starting
    is found by scanning /proc for ``-Dopensearch.path.conf=<its conf folder>``.
    """
    pid = read_pid(spec.pid_file)
    if pid is not None:
        return pid
    marker = f"-Dopensearch.path.conf={spec.folder / 'conf'}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if MAIN_CLASS in cmdline and marker in cmdline.split(b"\0"):
            return int(proc.name)
    return None


def ensure_system_user(name: str) -> None:
    """Create the system user the node runs as (only when we are root and it is missing)."""
    try:
        pwd.getpwnam(name)
        return
    except KeyError:
        pass
    useradd = shutil.which("useradd")
    if useradd is None:
        raise StackError(f"system user {name!r} is missing and useradd is not available")
    logger.info("creating system user %s for OpenSearch", name)
    result = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 and "already exists" not in result.stderr:
        raise StackError(f"useradd {name} failed: {result.stderr.strip()}")


def _chown_tree(root: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for path in [root, *root.rglob("*")]:
        os.lchown(path, entry.pw_uid, entry.pw_gid)


def prepare(spec: NodeSpec, home: Path, heap: str, run_as: str | None) -> None:
    """Write the node's config folder (kept between restarts, data is never wiped here)."""
    conf = spec.folder / "conf"
    for sub in ("conf", "data", "logs"):
        (spec.folder / sub).mkdir(parents=True, exist_ok=True)
    (conf / "opensearch.yml").write_text(spec.opensearch_yml(), encoding="utf-8")
    (conf / "jvm.options").write_text(
        jvm_options(home, spec.folder / "logs", heap), encoding="utf-8"
    )
    (conf / "jvm.options.d").mkdir(exist_ok=True)
    shutil.copy2(home / "config" / "log4j2.properties", conf / "log4j2.properties")
    if spec.scheme == "https":  # the security plugin wants its config files private
        for path in conf.rglob("*"):
            if path.is_file():
                path.chmod(0o600)
    if run_as:
        _chown_tree(spec.folder, run_as)
        for parent in spec.folder.parents:  # the user must traverse down to its folder
            if parent == Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o111)


def start(spec: NodeSpec, home: Path, java_home: Path, heap: str, run_as: str | None) -> None:
    """Start the node in the background (``bin/opensearch -d``); return once it was launched."""
    running = find_pid(spec)
    if running:
        logger.info("%s already running (pid %s)", spec.name, running)
        return
    prepare(spec, home, heap, run_as)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "OPENSEARCH_JAVA_HOME": str(java_home),
        "OPENSEARCH_PATH_CONF": str(spec.folder / "conf"),
        "LANG": "C.UTF-8",
    }
    command = [str(home / "bin" / "opensearch"), "-d", "-p", str(spec.pid_file)]
    if run_as:
        runuser = shutil.which("runuser")
        if runuser is None:
            raise StackError("runuser is needed to start OpenSearch as a non-root user")
        command = [
            runuser,
            "-u",
            run_as,
            "--",
            "env",
            *(f"{k}={v}" for k, v in env.items()),
            *command,
        ]
    logger.info("starting %s on %s", spec.name, spec.url)
    with (spec.folder / "logs" / "stdout.log").open("wb") as out:
        result = subprocess.run(
            command,
            cwd=spec.folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=300,
        )
    if result.returncode != 0 or find_pid(spec) is None:
        raise StackError(
            f"{spec.name} failed to start (exit {result.returncode}); logs in "
            f"{spec.folder / 'logs'}:\n{log_tail(spec)}"
        )


def log_tail(spec: NodeSpec, lines: int = 8) -> str:
    texts = []
    logs = spec.folder / "logs"
    for path in (logs / "stdout.log", logs / f"{spec.cluster_name}.log"):
        if path.is_file():
            texts.extend(path.read_text(errors="replace").splitlines()[-lines:])
    return "\n".join(texts)


def http_ready(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_http(spec: NodeSpec, deadline: float, ready: Callable[[str], bool] = http_ready) -> None:
    """Block until ``ready(spec.url)``, raising with the log tail when it died or timed out."""
    while time.monotonic() < deadline:
        if ready(spec.url):
            return
        if find_pid(spec) is None:
            raise StackError(f"{spec.name} exited during start-up:\n{log_tail(spec)}")
        time.sleep(1.0)
    raise StackError(f"{spec.name} did not answer on {spec.url} in time:\n{log_tail(spec)}")


def stop(spec: NodeSpec, timeout: float = 60.0) -> bool:
    """Stop the node (SIGTERM, then SIGKILL after ``timeout``); False when it was not running."""
    pid = find_pid(spec)
    if pid is None:
        return False
    logger.info("stopping %s (pid %d)", spec.name, pid)
    terminate(pid, lambda: find_pid(spec) is not None, timeout, spec.name)
    return True
