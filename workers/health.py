"""Plain functions behind the health tasks (runnable without a broker), and the stack dump.

A worker that does not stop or seems stuck can be asked where it is without stopping it:
``kill -USR2 -<pgid>`` (the worker's process group: main process and pool) writes every
thread's Python stack of each process to the worker's stderr (its log).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import socket
import sys
import time
from typing import TextIO

#: The signal that makes a worker process write its threads' stacks (Celery keeps SIGUSR1
#: for the soft time limit in the pool and its own "cry" log in the main process).
STACK_DUMP_SIGNAL = signal.SIGUSR2


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


def install_stack_dump(stream: TextIO | None = None) -> None:
    """Make :data:`STACK_DUMP_SIGNAL` write all threads' stacks to ``stream`` (stderr).

    Installed in the worker's main process before its pool forks: the pool processes inherit
    it (billiard resets only the termination signals and SIGUSR1). The dump is written by
    :mod:`faulthandler` from the signal handler itself, so it works while the process is
    blocked in C code (a socket read, ONNX Runtime) or holds the GIL in a loop, and the
    process carries on afterwards.
    """
    faulthandler.register(STACK_DUMP_SIGNAL, file=stream or sys.stderr, all_threads=True)
