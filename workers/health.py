"""Plain functions behind the health tasks (runnable without a broker)."""

from __future__ import annotations

import os
import socket
import time


def describe_worker(payload: dict) -> dict:
    """Echo ``payload`` with the identity of the process that ran it.

    Used to prove that a task crossed the broker into a separate worker process.
    """
    return {
        "echo": payload,
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "time": time.time(),
    }
