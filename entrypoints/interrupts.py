"""SIGINT and SIGTERM as exceptions, so a stopped run unwinds: each `finally` removes its
temporary files, and the CLI ends with one line and the shell's exit status for the signal."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


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


@contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within this block, SIGINT and SIGTERM raise `Interrupted` in the main thread. Python runs
    the handler between bytecodes, so a step already on the device finishes first: the run
    stops at the next step. Outside the main thread (embedded use) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
