"""Plain functions behind the health tasks (runnable without a broker), and the stack dump.

A worker that does not stop or seems stuck can be asked where it is without stopping it:
``kill -USR2 <pid>`` of its main process, then of each pool process (one at a time, so the
dumps do not interleave), writes every thread's Python stack to the worker's stderr (its log).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import socket
import sys
import time

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


def install_stack_dump() -> None:
    """Make :data:`STACK_DUMP_SIGNAL` write all threads' stacks to stderr.

    Installed in the worker's main process before its pool forks: the pool processes inherit
    it (billiard resets only the termination signals and SIGUSR1). The dump is written by
    :mod:`faulthandler` from the signal handler itself, so it works while the process is
    blocked in C code (a socket read, ONNX Runtime) or holds the GIL in a loop, and the
    process carries on afterwards.
    """
    faulthandler.register(STACK_DUMP_SIGNAL, file=sys.stderr, all_threads=True)
