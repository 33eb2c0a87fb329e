"""The local Redis of the stack: Debian's redis-server (installed on demand) or one on PATH."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from mathsearch.core.errors import StackError
from mathsearch.core.redact import redact_url
from mathsearch.stack.process import terminate

logger = logging.getLogger(__name__)

POLICY_RC = Path("/usr/sbin/policy-rc.d")


@dataclass(frozen=True)
class RedisSpec:
    url: str
    folder: Path

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 6379

    @property
    def pid_file(self) -> Path:
        return self.folder / "redis.pid"

    @property
    def is_local(self) -> bool:
        return self.host in {"127.0.0.1", "localhost", "::1"}


def ping(host: str, port: int, timeout: float = 1.0) -> str | None:
    """Send a raw RESP ``INFO server``; return the redis_version, or None when nobody answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            data = b""
            while b"redis_version" not in data or not data.endswith(b"\r\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    for line in data.decode(errors="replace").splitlines():
        if line.startswith("redis_version:"):
            return line.split(":", 1)[1].strip()
    return "unknown" if data.startswith(b"$") else None


def find_redis_server(install: bool = True) -> str:
    """Path of redis-server, installing Debian's package when missing and we are root."""
    found = shutil.which("redis-server")
    if found:
        return found
    apt = shutil.which("apt-get")
    if not install or apt is None or os.geteuid() != 0:
        raise StackError(
            "redis-server is not on PATH; install it (apt-get install redis-server) "
            "or point MATHSEARCH_REDIS_URL at a running Redis"
        )
    logger.info("installing Debian's redis-server (apt-get)")
    # policy-rc.d keeps the package from starting a system-wide Redis on 6379 behind our back.
    own_policy = not POLICY_RC.exists()
    if own_policy:
        POLICY_RC.write_text("#!/bin/sh\nexit 101\n")
        POLICY_RC.chmod(0o755)
    try:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            [apt, "-qq", "update"],
            [apt, "-qq", "install", "-y", "--no-install-recommends", "redis-server"],
        ):
            result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            if result.returncode != 0:
                raise StackError(f"{' '.join(command)} failed: {result.stderr.strip()[-1000:]}")
    finally:
        if own_policy:
            POLICY_RC.unlink(missing_ok=True)
    found = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(found).is_file():
        raise StackError("apt-get installed redis-server but the binary is not on PATH")
    return found


def read_pid(spec: RedisSpec) -> int | None:
    try:
        pid = int(spec.pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"redis-server" in cmdline else None


def start(spec: RedisSpec, timeout: float = 30.0) -> str:
    """Start Redis for ``spec`` unless one already answers there. Returns a one-line status."""
    version = ping(spec.host, spec.port)
    if version:
        owner = "ours" if read_pid(spec) else "already running, reused"
        return f"Redis {version} at {redact_url(spec.url)} ({owner})"
    if not spec.is_local:
        url = redact_url(spec.url)
        raise StackError(f"MATHSEARCH_REDIS_URL={url} does not answer and is not local")
    binary = find_redis_server()
    spec.folder.mkdir(parents=True, exist_ok=True)
    command = [
        binary,
        "--bind", spec.host,
        "--port", str(spec.port),
        "--daemonize", "yes",
        "--pidfile", str(spec.pid_file),
        "--logfile", str(spec.folder / "redis.log"),
        "--dir", str(spec.folder),
        "--appendonly", "yes",
        "--save", "",
        "--protected-mode", "yes",
    ]  # fmt: skip
    logger.info("starting Redis on %s", redact_url(spec.url))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise StackError(f"redis-server failed: {(result.stdout + result.stderr).strip()}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        version = ping(spec.host, spec.port)
        if version:
            return f"Redis {version} at {redact_url(spec.url)} (ours)"
        time.sleep(0.2)
    url = redact_url(spec.url)
    raise StackError(f"Redis did not answer on {url}; see {spec.folder / 'redis.log'}")


def stop(spec: RedisSpec, timeout: float = 30.0) -> bool:
    """Stop the Redis we started (never one we merely reused)."""
    pid = read_pid(spec)
    if pid is None:
        return False
    terminate(pid, lambda: read_pid(spec) is not None, timeout, "Redis")
    return True
