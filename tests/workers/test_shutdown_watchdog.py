"""The warm-shutdown watchdog: pool processes that never exit are stopped once no batch runs.

The pure parts run on their own processes (a parent of our own with one child, never pytest's
children); the last test stops a real `mathsearch worker` whose pool process cannot read its
stop message (SIGSTOP), the state a missed stop message leaves behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mathsearch.workers.app import create_app
from mathsearch.workers.queues import DEFAULT
from mathsearch.workers.shutdown_watchdog import child_pids, watch_shutdown

LINUX = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")

# a parent that starts one child, prints its pid and reaps it when it ends (no zombie)
PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(child.pid, flush=True)
child.wait()
import time; time.sleep(600)
"""
SLEEPER = "import time; time.sleep(600)"
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"


def _write_stat(proc: Path, pid: int, comm: str, state: str, ppid: int) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) {state} {ppid} 1 1 0 -1\n")


def test_child_pids_reads_the_parent_after_the_command_name(tmp_path: Path) -> None:
    _write_stat(tmp_path, 11, "celery", "S", 7)
    _write_stat(tmp_path, 12, "weird ) name 7", "S", 3)  # comm with spaces and a parenthesis
    _write_stat(tmp_path, 13, "python", "Z", 7)  # a zombie is not alive
    _write_stat(tmp_path, 14, "python", "R", 7)
    (tmp_path / "self").mkdir()  # not a pid
    assert child_pids(7, tmp_path) == [11, 14]
    assert child_pids(3, tmp_path) == [12]
    assert child_pids(7, tmp_path / "missing") == []


@pytest.fixture
def family(request) -> Iterator[tuple[int, int]]:
    """(parent pid, child pid): the child runs ``request.param``."""
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, request.param], stdout=subprocess.PIPE, text=True
    )
    child = int(parent.stdout.readline())
    yield parent.pid, child
    for pid in (child, parent.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    parent.wait()


@LINUX
@pytest.mark.parametrize("family", [SLEEPER], indirect=True)
def test_waits_while_a_batch_runs_then_stops_the_child(family) -> None:
    parent, child = family
    polls = iter([1] * 6)  # a batch runs for the first six polls
    started = time.monotonic()
    stopped = watch_shutdown(
        lambda: next(polls, 0), parent=parent, grace=0.5, kill_after=5, poll=0.1
    )
    assert stopped == [child]
    assert time.monotonic() - started >= 0.6 + 0.5  # the running batch, then the grace
    assert child_pids(parent) == []


@LINUX
@pytest.mark.parametrize("family", [STUBBORN], indirect=True)
def test_a_child_that_ignores_sigterm_is_killed(family) -> None:
    parent, child = family
    started = time.monotonic()
    assert watch_shutdown(lambda: 0, parent=parent, grace=0.2, kill_after=1, poll=0.05) == [child]
    assert time.monotonic() - started >= 1  # SIGTERM did nothing; SIGKILL after kill_after
    assert child_pids(parent) == []


@LINUX
@pytest.mark.parametrize("family", [SLEEPER], indirect=True)
def test_nothing_to_stop_when_the_pool_has_exited(family) -> None:
    parent, child = family
    os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while child_pids(parent) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watch_shutdown(lambda: 0, parent=parent, grace=0.1, poll=0.05) == []


@LINUX
@pytest.mark.services
def test_warm_shutdown_ends_when_a_pool_process_cannot_take_its_stop_message(pipeline) -> None:
    worker = pipeline["spawn"](concurrency=1)
    app = create_app(pipeline["settings"])
    queue = pipeline["settings"].queue(DEFAULT)
    answer = app.send_task("mathsearch.ping", args=[{"n": 1}], queue=queue).get(timeout=60)
    (pool,) = worker.children()
    assert answer["pid"] == pool
    os.kill(pool, signal.SIGSTOP)  # idle, and now deaf: Celery's join would wait for ever
    worker.process.send_signal(signal.SIGTERM)
    assert worker.wait_exit(timeout=60) == 0, worker.output()
    log = worker.output(limit=20_000)
    assert f"pool process(es) {pool} have not exited" in log, log[-3000:]
    assert "killing pool process(es)" in log  # a stopped process only dies of SIGKILL
