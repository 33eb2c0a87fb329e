"""A warm shutdown that cannot hang on a pool process that never exits.

Celery's warm shutdown (SIGTERM) lets the running batches finish, then closes the prefork pool
and waits (``join``) for each pool process to exit (Celery 5.7, billiard 4.3). When the SIGTERM
comes just after the worker was handed a batch, a pool process can fail to exit. The stack dumps
(``kill -USR2``, :mod:`mathsearch.workers.health`) showed two states, with the main process in
``Pool.join`` both times:

* the pool process is blocked in billiard's ``_recv_bytes``, reading the body of a message whose
  4-byte header had arrived: the main process stopped writing the new batch to it mid-message.
  The join waits for ever, and the batch the worker had reserved stays unacknowledged in Redis
  until the visibility timeout;
* the pool process is in billiard's ``_ensure_messages_consumed``, waiting up to 30 s for a
  counter of consumed results that the joining main process does not advance.

In a loop of ``tests/workers/test_warm_shutdown.py``'s scenario, 3 of 49 warm shutdowns without
the watchdog took 31.8 s (twice) or did not end within 98 s (once).

:func:`install_shutdown_watchdog` starts a thread with each warm shutdown. Once no batch has run
in this worker for ``grace`` seconds (:data:`celery.worker.state.active_requests` is empty),
any pool processes still alive are asked to stop (SIGTERM), then killed (SIGKILL)
``kill_after`` seconds later. The join then returns and the shutdown ends as usual: reserved
batches go back to Redis and the exit code is Celery's. A running batch is never cut short: the
watchdog waits while one runs, however long (the task time limit bounds that).

Example::

    install_shutdown_watchdog()  # in the worker's main process, before app.worker_main(...)
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Seconds with no running batch after which pool processes that have not exited are stopped.
GRACE_SECONDS = 10.0
#: Seconds between SIGTERM and SIGKILL of a pool process that does not exit.
KILL_AFTER_SECONDS = 5.0
#: Seconds the watchdog waits for the processes it SIGKILLed to be gone before it returns.
REAP_SECONDS = 2.0


def child_pids(parent: int, proc: Path = Path("/proc")) -> list[int]:
    """The live (not zombie) processes whose parent is ``parent``, from ``/proc/<pid>/stat``.

    Linux only; [] where there is no ``/proc``, so the watchdog then does nothing.
    """
    children = []
    try:
        entries = [entry for entry in os.scandir(proc) if entry.name.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            stat = (Path(entry.path) / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after it
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(parent) and fields[0] != "Z":
            children.append(int(entry.name))
    return sorted(children)


def _alive(pids: Iterable[int], parent: int) -> list[int]:
    live = set(child_pids(parent))  # one scan of /proc for all of them
    return [pid for pid in pids if pid in live]


def _signal(pids: Iterable[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def watch_shutdown(
    running: Callable[[], int],
    *,
    parent: int | None = None,
    grace: float = GRACE_SECONDS,
    kill_after: float = KILL_AFTER_SECONDS,
    poll: float = 0.5,
) -> list[int]:
    """Wait until ``running()`` (batches running now) has been 0 for ``grace`` seconds, then stop
    the children of ``parent`` still alive: SIGTERM, SIGKILL after ``kill_after`` seconds.

    Returns the pids it signalled ([] when the pool had exited by itself, the usual case: the
    watchdog's thread then ends with the process), once those it killed are gone (at most
    :data:`REAP_SECONDS` after the SIGKILL).
    """
    parent = os.getpid() if parent is None else parent
    idle_since: float | None = None
    while True:
        time.sleep(poll)
        now = time.monotonic()
        if running():
            idle_since = None
            continue
        idle_since = now if idle_since is None else idle_since
        if now - idle_since < grace:
            continue
        stuck = child_pids(parent)
        if not stuck:
            return []
        logger.warning(
            "warm shutdown: no batch has run for %.0f s but pool process(es) %s have not "
            "exited; stopping them (SIGTERM, then SIGKILL after %.0f s)",
            now - idle_since,
            ", ".join(map(str, stuck)),
            kill_after,
        )
        _signal(stuck, signal.SIGTERM)
        deadline = time.monotonic() + kill_after
        while (left := _alive(stuck, parent)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if left:
            logger.warning("warm shutdown: killing pool process(es) %s", ", ".join(map(str, left)))
            _signal(left, signal.SIGKILL)
            # SIGKILL cannot be ignored but lands asynchronously: return once it has
            deadline = time.monotonic() + REAP_SECONDS
            while (left := _alive(left, parent)) and time.monotonic() < deadline:
                time.sleep(0.05)
            if left:
                logger.warning("warm shutdown: %s still alive after SIGKILL", left)
        return stuck


def _running_batches() -> int:
    from celery.worker import state

    return len(state.active_requests)


def install_shutdown_watchdog(
    grace: float = GRACE_SECONDS, kill_after: float = KILL_AFTER_SECONDS
) -> None:
    """Start :func:`watch_shutdown` in a daemon thread when this worker begins a warm shutdown.

    Call it in the worker's main process before ``app.worker_main``; Celery sends
    ``worker_shutting_down`` from its SIGTERM / SIGINT handler there. A cold shutdown needs no
    watchdog: Celery terminates the pool itself.
    """
    from celery.signals import worker_shutting_down

    started = threading.Event()

    def on_shutting_down(sender: Any = None, how: str = "", **_: Any) -> None:
        if how != "Warm" or started.is_set():
            return
        started.set()
        threading.Thread(
            target=watch_shutdown,
            args=(_running_batches,),
            kwargs={"grace": grace, "kill_after": kill_after},
            name="mathsearch-shutdown-watchdog",
            daemon=True,
        ).start()

    worker_shutting_down.connect(on_shutting_down, weak=False)
