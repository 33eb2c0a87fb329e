"""Stopping the stack's daemons: SIGTERM, a grace period, then SIGKILL."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


def terminate(pid: int, alive: Callable[[], bool], timeout: float, name: str) -> None:
    """Send SIGTERM to ``pid``; SIGKILL it when ``alive()`` still holds after ``timeout`` s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return
        time.sleep(0.2)
    logger.warning("%s ignored SIGTERM for %.0fs; killing it", name, timeout)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
