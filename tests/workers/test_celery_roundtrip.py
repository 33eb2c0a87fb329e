"""A task goes through the real Redis broker to a real Celery worker process and back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from mathsearch.workers.app import create_app
from mathsearch.workers.settings import WorkerSettings

pytestmark = pytest.mark.services


@pytest.fixture
def worker(worker_settings: WorkerSettings) -> Iterator[tuple[str, subprocess.Popen]]:
    """`mathsearch worker` in its own process, consuming a queue of its own."""
    queue = f"test-{uuid.uuid4().hex[:8]}"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mathsearch.cli.main",
            "worker",
            f"--queues={queue}",
            "--concurrency=1",
            f"--hostname={queue}@%h",
            "--loglevel=WARNING",
        ],
        env={**os.environ, "MATHSEARCH_REDIS_URL": worker_settings.redis_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield queue, process
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_task_round_trip_through_redis_to_a_worker_process(worker, worker_settings) -> None:
    queue, process = worker
    app = create_app(worker_settings)
    payload = {"latex": r"E = mc^2", "n": 3}
    result = app.send_task("mathsearch.ping", args=[payload], queue=queue)
    try:
        answer = result.get(timeout=90)
    except Exception:
        process.kill()
        output = process.communicate()[0]
        pytest.fail(f"no answer from the worker; its output:\n{output[-3000:]}")
    assert answer["echo"] == payload
    assert answer["pid"] != os.getpid()
    # the task ran in the worker's process tree (the pool child of the worker we started)
    assert answer["pid"] == process.pid or _is_descendant(answer["pid"], process.pid)
    assert result.status == "SUCCESS"


def test_parse_task_featurises_in_the_worker_and_bad_records_come_back_as_failures(
    worker, worker_settings
) -> None:
    queue, process = worker
    app = create_app(worker_settings)
    records = [
        {"eq_id": "p#0", "doc_id": "p", "position": 0, "latex": r"\frac{a}{b} + x^2"},
        {"eq_id": "p#1", "doc_id": "p", "position": 1, "latex": r"\frac{a}{b"},
        {"eq_id": "p#2", "doc_id": "p", "unexpected": 1},
    ]
    result = app.send_task("mathsearch.parse.records", args=[records], queue=queue)
    try:
        answer = result.get(timeout=120)
    except Exception:
        process.kill()
        output = process.communicate()[0]
        pytest.fail(f"no answer from the worker; its output:\n{output[-3000:]}")
    assert [item["eq_id"] for item in answer[:2]] == ["p#0", "p#1"]
    good, bad, odd = answer
    assert "a|frac|b" in good["math_tokens"]
    assert good["graph"] and good["mathml"].startswith("<math")
    assert bad["failure"] and (bad["stage"], bad["reason"]) == ("convert", "unbalanced-braces")
    assert odd["failure"]
    # the worker carries on after bad input
    again = app.send_task("mathsearch.parse.records", args=[records[:1]], queue=queue)
    assert again.get(timeout=60)[0]["eq_id"] == "p#0"


def _is_descendant(pid: int, ancestor: int) -> bool:
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
        if pid == ancestor:
            return True
    return False
