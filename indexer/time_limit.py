"""A wall-clock limit around one call, for stages whose library code may run away (SymPy, ...).

:func:`run_with_time_limit` runs ``func(*args)`` and raises ``error(message, "timeout")`` when
it has not returned after ``timeout`` seconds::

    run_with_time_limit(sympy.simplify, 2.0, (expr,), error=PrefixError, what="SymPy")

How: SIGALRM in the main thread (repeated every 0.1 s, since Python drops an exception raised
inside a garbage-collector callback or a ``__del__``; while the alarm is armed such a dropped
deadline is kept out of ``sys.unraisablehook``, so test runners and logs do not report it as
an error), else - another thread, or an alarm already armed by the
caller - a child process (forked where possible) killed at the deadline. A signal cannot cut one
long C call short: callers keep such calls out of ``func`` (e.g. guards on huge numbers). In a
child, ``func``, its arguments and its result must be picklable where the start method is
``spawn``; an ``error`` raised there comes back with its message and reason, any other exception
(or the child's death) as ``error(..., failure_reason)``.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from mathsearch.indexer.errors import IndexerError, LimitExceeded

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, SpawnContext

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Reason code of the error raised when the limit passes.
TIMEOUT_REASON = "timeout"
_SPAWN_STARTUP = 15.0  # seconds a spawned child may take to import its modules


class _Deadline(BaseException):
    """Raised by the SIGALRM handler; a BaseException so ``except Exception`` cannot eat it."""


def run_with_time_limit(
    func: Callable[..., T],
    timeout: float | None,
    args: tuple[Any, ...] = (),
    *,
    error: type[IndexerError] = LimitExceeded,
    what: str = "the call",
    failure_reason: str | None = None,
) -> T:
    """``func(*args)``, or ``error(f"{what} took longer than {timeout} s", "timeout")``.

    ``timeout`` ``None`` or ``<= 0`` runs ``func`` without a limit. ``failure_reason``
    (default ``error.reason``) is the reason when ``func`` fails otherwise in a child process.
    """
    if timeout is None or timeout <= 0:
        return func(*args)
    alarm_free = hasattr(signal, "setitimer") and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    if alarm_free and threading.current_thread() is threading.main_thread():
        try:
            return _with_alarm(func, args, timeout, error, what)
        except _Deadline:  # a late repeat of the alarm that escaped the clean-up
            raise error(f"{what} took longer than {timeout} s", TIMEOUT_REASON) from None
    reason = error.reason if failure_reason is None else failure_reason
    return _in_child(func, args, timeout, error=error, what=what, failure_reason=reason)


def _with_alarm(
    func: Callable[..., T],
    args: tuple[Any, ...],
    timeout: float,
    error: type[IndexerError],
    what: str,
) -> T:
    """SIGALRM at the deadline, repeated every 0.1 s: a ``_Deadline`` raised where Python
    ignores exceptions (a generator finalised by the garbage collector) is not the last."""
    armed = True

    def on_alarm(signum: int, frame: Any) -> None:
        if armed:
            raise _Deadline

    previous_hook = sys.unraisablehook

    def drop_deadline(unraisable: Any) -> None:
        if unraisable.exc_type is not _Deadline:  # a deadline dropped here is repeated
            previous_hook(unraisable)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    sys.unraisablehook = drop_deadline
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, timeout, 0.1)
            return func(*args)
        finally:
            armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    except _Deadline:
        raise error(f"{what} took longer than {timeout} s", TIMEOUT_REASON) from None
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)
        sys.unraisablehook = previous_hook


def _child(
    conn: Any,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    error: type[IndexerError],
    failure_reason: str,
) -> None:
    try:
        conn.send(("ok", func(*args)))
    except error as exc:
        conn.send(("error", (exc.reason, str(exc))))
    except BaseException as exc:  # everything goes back to the parent
        conn.send(("error", (failure_reason, f"{type(exc).__name__}: {exc}"[:200])))
    finally:
        conn.close()


def _in_child(
    func: Callable[..., T],
    args: tuple[Any, ...],
    timeout: float,
    *,
    error: type[IndexerError],
    what: str,
    failure_reason: str,
) -> T:
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context: ForkContext | SpawnContext = (
        multiprocessing.get_context("fork")
        if method == "fork"
        else multiprocessing.get_context("spawn")
    )
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child, args=(sender, func, args, error, failure_reason), daemon=True
    )
    try:
        process.start()
    except AssertionError:  # a daemonic process may not have children: run unguarded
        logger.warning("no child process possible here; %s runs without a time limit", what)
        return func(*args)
    finally:
        sender.close()
    try:
        if not receiver.poll(timeout + (_SPAWN_STARTUP if method == "spawn" else 0.0)):
            raise error(f"{what} took longer than {timeout} s", TIMEOUT_REASON)
        status, payload = receiver.recv()
    except EOFError as exc:
        raise error(f"{what} child process died", failure_reason) from exc
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join()
    if status == "ok":
        return payload
    raise error(payload[1], payload[0])
