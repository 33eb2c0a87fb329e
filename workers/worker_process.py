"""Start ``mathsearch worker`` in a process of its own and wait until it consumes its queues.

Used by the demo, ``mathsearch bench index`` and the tests: one way to start a worker, check it
is consuming the ``parse`` queue, and stop it with a warm shutdown.

Example::

    process = start_worker(WorkerSettings.from_env(), concurrency=2)
    ...
    stop_worker(process)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from mathsearch.workers.index_job import Broker, IndexJobError
from mathsearch.workers.settings import WorkerSettings


def start_worker(
    settings: WorkerSettings,
    concurrency: int = 1,
    *,
    metrics_port: int = 0,
    hostname: str = "mathsearch-%h",
    env: dict[str, str] | None = None,
    log: Path | None = None,
    loglevel: str = "WARNING",
    timeout: float = 120.0,
    encoders: Sequence[str] | None = None,
) -> subprocess.Popen:
    """Start a worker on ``settings``'s broker and queue prefix; return once it consumes.

    ``encoders`` (families or ``.onnx`` paths) are the models it serves (``--encoders``;
    default: ``MATHSEARCH_ENCODERS`` of ``env``, else ``gcn``).

    Raises:
        IndexJobError: the worker exited, or did not consume within ``timeout`` seconds (the
            message carries the end of its log).
    """
    environment = {
        **os.environ,
        "MATHSEARCH_REDIS_URL": settings.redis_url,
        "MATHSEARCH_RESULT_BACKEND": settings.result_backend,
        "MATHSEARCH_QUEUE_PREFIX": settings.queue_prefix,
        **(env or {}),
    }
    name = f"mathsearch-worker-{os.getpid()}-{time.time_ns()}.log"
    log = log or Path(tempfile.gettempdir()) / name
    command = [
        sys.executable,
        "-m",
        "mathsearch",
        "worker",
        f"--concurrency={concurrency}",
    ]
    command += [f"--metrics-port={metrics_port}", f"--hostname={hostname}@%h"]
    command.append(f"--loglevel={loglevel}")
    if encoders:
        command.append(f"--encoders={','.join(encoders)}")
    with log.open("a") as handle:
        process = subprocess.Popen(
            command, env=environment, stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    queue = Broker(settings)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise IndexJobError(f"the worker exited: {log.read_text(errors='replace')[-1500:]}")
        try:
            queue.check_workers()
            return process
        except IndexJobError:
            time.sleep(0.5)
    stop_worker(process)
    raise IndexJobError(f"the worker did not consume within {timeout:.0f} s; see {log}")


def stop_worker(process: subprocess.Popen, timeout: float = 60.0) -> None:
    """SIGTERM (Celery's warm shutdown), then SIGKILL of its process group after ``timeout``."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
