"""A live worker writes every process's stacks on its dump signal and carries on."""

from __future__ import annotations

import os
import re
import time

import pytest

from mathsearch.workers.app import create_app
from mathsearch.workers.health import STACK_DUMP_SIGNAL
from mathsearch.workers.queues import DEFAULT

pytestmark = pytest.mark.services


def test_dump_signal_writes_the_stacks_of_the_main_process_and_the_pool(pipeline) -> None:
    worker = pipeline["spawn"](concurrency=2)
    children = worker.children()
    assert len(children) == 2, children
    for expected, pid in enumerate([worker.process.pid, *children], start=1):
        os.kill(pid, STACK_DUMP_SIGNAL)  # one at a time, as docs/workers.md says: no interleaving
        deadline = time.monotonic() + 30
        while worker.output(limit=200_000).count("Current thread 0x") < expected:
            assert time.monotonic() < deadline, f"no stack dump from process {pid}"
            time.sleep(0.2)
        time.sleep(0.5)  # the rest of its dump
    log = worker.output(limit=200_000)
    # one dump per process (the main process and both pool processes), each with Python frames
    assert log.count("Current thread 0x") == 3, log[-3000:]
    assert re.search(r'File ".*celery/worker/.*", line \d+', log), log[-3000:]
    assert re.search(r'File ".*billiard/pool\.py", line \d+', log), log[-3000:]
    # ... and the worker was not stopped by it: same pool, and it still runs tasks
    assert worker.process.poll() is None
    assert sorted(worker.children()) == sorted(children)
    app = create_app(pipeline["settings"])
    answer = app.send_task(
        "mathsearch.ping", args=[{"n": 1}], queue=pipeline["settings"].queue(DEFAULT)
    ).get(timeout=60)
    assert answer["pid"] in children
