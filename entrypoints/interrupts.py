"""SIGINT and SIGTERM as exceptions, so a stopped run unwinds: each `finally` removes its
temporary files, and the CLI ends with one line and the shell's exit status for the signal.

An exception raised by a signal handler can be lost: Python runs the handler in whatever
frame is executing, and a garbage-collector callback (JAX's `_xla_gc_callback`), a `__del__` or
any `except BaseException: pass` on the way drops it ("Exception ignored in ..."). So the
handler also records the signal, and the run asks again at safe points (`Stops.check`: each
denoising step, between phases) and, last, before its output is renamed into place
(`Stops.committing`): a recorded stop is never lost, and a stopped run never leaves an output.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(BaseException):
    """The run was stopped by a signal; a BaseException, like KeyboardInterrupt, so that no
    `except Exception` on the way swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """128 + the signal's number, as a shell reports a process killed by it (130, 143)."""
        return 128 + self.signum


class Stops:
    """The signals received while a run was stoppable (the first one decides)."""

    def __init__(self) -> None:
        self._signum: int | None = None
        self._holding = False  # the output is being renamed into place
        self._done = False  # the output is in place: the run is over

    def handle(self, signum: int, frame: object) -> None:
        """The signal handler: records the signal and raises `Interrupted` here and now, unless
        the output is being renamed into place or is already there (`committing`)."""
        if self._done:
            return
        if self._signum is None:
            self._signum = signum
        if not self._holding:
            raise Interrupted(self._signum)

    def check(self) -> None:
        """Raises `Interrupted` if a signal came, even one whose exception was swallowed."""
        if self._signum is not None and not self._done:
            raise Interrupted(self._signum)

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Around the renames that put the output in place: refuses (`Interrupted`) if a signal
        came, and lets no later one interrupt the renames, so the output is either not there or
        all there; once it is, the run is over and a signal changes nothing. (Blocking the
        signals would not do: another thread of the process would take them.)"""
        self._holding = True
        try:
            self.check()
            yield
            self._done = True
        finally:
            self._holding = False


@contextmanager
def signals_interrupt() -> Iterator[Stops]:
    """Within this block, SIGINT and SIGTERM raise `Interrupted` in the main thread, and the
    yielded `Stops` remembers them. Python runs the handler between bytecodes, so a step
    already on the device finishes first: the run stops at the next step. An `Interrupted`
    that something swallowed is not reported as "Exception ignored": the recorded stop is
    honoured at the next check. Outside the main thread (embedded use) nothing changes."""
    stops = Stops()
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return
    previous = {signum: signal.signal(signum, stops.handle) for signum in SIGNALS}
    report_unraisable = sys.unraisablehook

    def quiet_when_interrupted(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, Interrupted):
            report_unraisable(unraisable)

    sys.unraisablehook = quiet_when_interrupted
    try:
        yield stops
    finally:
        sys.unraisablehook = report_unraisable
        for signum, handler in previous.items():
            signal.signal(signum, handler)
