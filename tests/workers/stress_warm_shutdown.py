"""Many warm shutdowns in a row: how long each takes, and whether its job still completes.

Not part of the suite: the name keeps pytest from collecting it, and it runs for minutes. Run it
by path with the stack up::

    MATHSEARCH_STRESS_SHUTDOWNS=45 python -m pytest -s tests/workers/stress_warm_shutdown.py

Each round is ``test_warm_shutdown.py``'s scenario: two workers share a job of 1,225 real items;
when one of them is seen running a batch it gets SIGTERM after a random 0-0.5 s. The round prints
the delay, the exit code, the seconds from SIGTERM to exit, whether the job completed and which
batches it had to send again. A worker that has not exited 8 s after SIGTERM is asked for its
stacks (SIGUSR2, into its log; the path is printed) and given 90 s more. docs/workers.md
("Warm and hard shutdown") has the figures.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from mathsearch.workers.app import create_app

from .conftest import WorkerProcess, fresh_alias
from .test_pipeline_faults import Job
from .test_warm_shutdown import busy, wait_for

pytestmark = pytest.mark.services


def _stop(worker: WorkerProcess) -> tuple[int | None, float]:
    started = time.monotonic()
    worker.process.send_signal(signal.SIGTERM)
    try:
        code = worker.process.wait(timeout=8)
    except Exception:
        worker.dump_stacks()
        print(f"  slow: stacks in {worker.log}")
        try:
            code = worker.process.wait(timeout=90)
        except Exception:
            code = None
    return code, time.monotonic() - started


def test_repeated_warm_shutdowns(client, settings, corpus, pipeline) -> None:
    rounds = int(os.environ.get("MATHSEARCH_STRESS_SHUTDOWNS", "10"))
    app = create_app(pipeline["settings"])
    seconds = []
    for attempt in range(rounds):
        with fresh_alias(client, settings, f"stress{attempt}") as alias:
            leaving = pipeline["spawn"](concurrency=1)
            staying = pipeline["spawn"](concurrency=1)
            job = Job(
                items=corpus, index=alias, worker_settings=pipeline["settings"], batch_size=20
            )
            job.start()
            wait_for(lambda worker=leaving: busy(app, worker), "a batch on the leaving worker")
            delay = random.uniform(0, 0.5)
            time.sleep(delay)
            code, took = _stop(leaving)
            report = job.finish()
            seconds.append(took)
            print(
                f"round {attempt}: delay {delay:.2f} s, exit code {code}, {took:.1f} s to exit, "
                f"job complete {report.complete}, resent {report.resent_batches}"
            )
            leaving.stop()
            staying.stop()
    seconds.sort()
    median, slowest = seconds[len(seconds) // 2], seconds[-1]
    print(f"{rounds} warm shutdowns: median {median:.1f} s to exit, slowest {slowest:.1f} s")
