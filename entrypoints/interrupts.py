"""SIGINT and SIGTERM as exceptions, so a stopped run unwinds: each `finally` removes its
temporary files, and the CLI ends with one line and the shell's exit status for the signal.

Python runs a signal handler in whatever frame is executing, which makes raising from it risky
in two ways, both seen in cold runs stopped about a second in:

- the exception can be lost: a garbage-collector callback (JAX's `_xla_gc_callback`), a
  `__del__` or any `except BaseException: pass` drops it ("Exception ignored in ..."). So the
  handler also records the signal, and the run asks again at safe points (`Stops.check`: each
  denoising step, between phases, at the end) and before its output is renamed into place
  (`Stops.committing`): a recorded stop is never lost, and a stopped run never leaves an output;
- the exception can break the standard library's own bookkeeping: raised inside importlib's
  module-lock callback it left the import lock held, and the run hung for good once another
  thread imported. So the handler never raises in a standard-library frame: it asks again
  (SIGALRM, every RETRY_SECONDS) until the run is back in its own or a library's code.
"""

from __future__ import annotations

import os
import signal
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
RETRY = signal.SIGALRM
RETRY_SECONDS = 0.05
_PATHS = sysconfig.get_paths()
_STANDARD_LIBRARY = tuple({_PATHS["stdlib"], _PATHS["platstdlib"]})
_SITE_PACKAGES = tuple({_PATHS["purelib"], _PATHS["platlib"]})


def stopped_line(signum: int, *, run_ended: bool = False) -> str:
    """The CLI's last line when a signal stopped it: during the run (which leaves nothing behind),
    or with `run_ended` as the process exits after it (what it wrote is whole, if anything)."""
    name = signal.Signals(signum).name
    if run_ended:
        return f"wanjax: stopped by {name} while exiting; the run had ended, and any output it wrote is complete"
    return f"wanjax: stopped by {name}; no partial output was left"


def end_at_once_on_signals(*, run_ended: bool = False) -> None:
    """Outside `signals_interrupt`: SIGINT and SIGTERM end the process at once, with the CLI's line
    and status. Called before the CLI's imports (seconds on a loaded machine), where Python's own
    handling would print a KeyboardInterrupt traceback from whichever module was loading (the
    process has written nothing yet, so nothing is left), and with `run_ended` after the run, while
    the process exits (seconds of JAX's teardown), when its output may be in place."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            line = stopped_line(signum, run_ended=run_ended)
            signal.signal(signum, lambda number, _, line=line: _end_now(number, line))


def run_to_exit(main: Callable[[], int]) -> int:
    """`main()` (the CLI), then the signals' handling of a process whose run has ended."""
    status = main()
    end_at_once_on_signals(run_ended=True)
    return status


def _end_now(signum: int, line: str) -> None:
    os.write(2, (line + "\n").encode())
    os._exit(128 + signum)


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
        self._received = 0  # SIGINT and SIGTERM so far (not the retries)
        self._holding = False  # the output is being renamed into place
        self._done = False  # the output is in place: the run is over

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The handler of SIGINT, SIGTERM and the retries' SIGALRM: records the signal and raises
        `Interrupted` here and now, unless the output is being renamed into place or is already
        there (`committing`), or `frame` is the standard library's (then it asks again soon)."""
        if self._done:
            return
        if signum != RETRY:
            self._received += 1
        if self._signum is None and signum != RETRY:
            self._signum = signum
        if self._signum is None or self._holding:
            return
        if _in_standard_library(frame):
            self.retry_soon()
            return
        raise Interrupted(self._signum)

    @property
    def repeated(self) -> bool:
        """A second signal came: whoever waits for a graceful stop should stop waiting."""
        return self._received >= 2

    def retry_soon(self) -> None:
        """Asks again in RETRY_SECONDS (SIGALRM), where the run may have left the frame at hand."""
        signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)

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
    that a callback or `__del__` dropped is not reported as "Exception ignored": it is raised
    again RETRY_SECONDS later (and any swallowed one at the next check). Outside the main
    thread (embedded use) nothing changes."""
    stops = Stops()
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return
    previous = {signum: signal.signal(signum, stops.handle) for signum in (*SIGNALS, RETRY)}
    report_unraisable = sys.unraisablehook

    def quiet_when_interrupted(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, Interrupted):
            stops.retry_soon()  # dropped by a callback or __del__: raise it again, elsewhere
        else:
            report_unraisable(unraisable)

    sys.unraisablehook = quiet_when_interrupted
    try:
        yield stops
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.unraisablehook = report_unraisable
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _in_standard_library(frame: FrameType | None) -> bool:
    """Whether `frame` runs the standard library's code (importlib's frozen modules included),
    which is not written to be interrupted at any bytecode."""
    if frame is None:
        return False
    path = frame.f_code.co_filename
    if path.startswith("<frozen "):
        return True
    return path.startswith(_STANDARD_LIBRARY) and not path.startswith(_SITE_PACKAGES)
