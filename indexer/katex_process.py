"""One long-running node process for :mod:`mathsearch.indexer.katex_backend`, fed and read by
threads.

:class:`NodeProcess` starts ``node convert.js`` in the katex install directory, waits for its
header line (``{"katex": "<version>"}``), queues every stdout line (``None`` at EOF) in
``answers`` and keeps the last stderr lines for error messages; writes happen on a thread so a
node that stops reading cannot block the caller. A node that does not start raises
:class:`~mathsearch.indexer.katex_install.KatexUnavailable`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import IO

from mathsearch.indexer.katex_install import KatexUnavailable, _tail

logger = logging.getLogger(__name__)

_STDERR_LINES = 40


class NodeProcess:
    """One node process running ``convert.js``, with threads draining stdout and stderr."""

    def __init__(self, node: str, directory: Path, start_timeout: float) -> None:
        self.stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self.answers: queue.Queue[bytes | None] = queue.Queue()
        try:
            self.process = subprocess.Popen(
                [node, str(directory / "convert.js")],
                cwd=directory,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise KatexUnavailable(f"cannot start {node} in {directory}: {exc}") from exc
        assert self.process.stdout is not None and self.process.stderr is not None
        threading.Thread(target=self._drain, args=(self.process.stdout,), daemon=True).start()
        self._stderr_thread = threading.Thread(
            target=self._log, args=(self.process.stderr,), daemon=True
        )
        self._stderr_thread.start()
        try:
            header = self.answers.get(timeout=start_timeout)
        except queue.Empty:
            header = None
        try:
            self.version = str(json.loads(header or b"{}")["katex"])
        except (ValueError, KeyError, TypeError):
            self.kill()
            self._stderr_thread.join(timeout=2)
            raise KatexUnavailable(
                f"{node} {directory / 'convert.js'} did not start: "
                f"{_tail(''.join(self.stderr)) or header!r}"
            ) from None

    def _drain(self, stream: IO[bytes]) -> None:
        for line in stream:
            self.answers.put(line)
        self.answers.put(None)

    def _log(self, stream: IO[bytes]) -> None:
        for raw in stream:
            line = raw.decode("utf-8", "replace")
            self.stderr.append(line)
            logger.debug("katex node: %s", line.rstrip())

    @property
    def exit_code(self) -> int | None:
        return self.process.returncode

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, payload: bytes) -> None:
        """Write one batch from a thread, so a node that stops reading cannot block us."""

        def write() -> None:
            stdin = self.process.stdin
            try:
                assert stdin is not None
                stdin.write(payload)
                stdin.flush()
            except (OSError, ValueError):
                pass  # the process died; the reader sees EOF

        threading.Thread(target=write, daemon=True).start()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def close(self, timeout: float = 5.0) -> None:
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
