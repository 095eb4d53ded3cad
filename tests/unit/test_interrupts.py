"""The CLI's signal handling in one process: a stop is recorded as well as raised, so one whose
exception was swallowed is still honoured, and never once the output is in place."""

import signal
import subprocess
import sys

import pytest

from wanjax.entrypoints.interrupts import Interrupted, Stops


def _swallowed(stops: Stops, signum: int) -> None:
    try:
        stops.handle(signum, None)
    except Interrupted:
        pass  # as JAX's garbage-collector callback drops it


def test_a_swallowed_stop_is_raised_at_the_next_check():
    stops = Stops()
    stops.check()  # nothing yet
    _swallowed(stops, signal.SIGTERM)
    with pytest.raises(Interrupted) as stopped:
        stops.check()
    assert stopped.value.exit_status == 143


def test_the_first_signal_decides():
    stops = Stops()
    _swallowed(stops, signal.SIGINT)
    with pytest.raises(Interrupted) as stopped:
        stops.handle(signal.SIGTERM, None)
    assert stopped.value.exit_status == 130


def test_committing_refuses_after_a_swallowed_stop_and_runs_nothing():
    stops, renamed = Stops(), []
    _swallowed(stops, signal.SIGINT)
    with pytest.raises(Interrupted):
        with stops.committing():
            renamed.append("video.mp4")
    assert renamed == []


def test_a_signal_during_the_renames_does_not_interrupt_them_and_then_changes_nothing():
    stops = Stops()
    with stops.committing():
        stops.handle(signal.SIGINT, None)  # returns: the renames go on
    stops.check()
    stops.handle(signal.SIGTERM, None)
    stops.check()


def test_a_signal_in_the_standard_library_is_raised_once_the_run_has_left_it():
    import copy
    import sys
    import time

    from wanjax.entrypoints.interrupts import signals_interrupt

    class FrameOfCopy:
        def __deepcopy__(self, memo):
            frames.append(sys._getframe(1))  # copy.py's, as importlib's was when the import lock leaked
            return self

    frames = []
    copy.deepcopy(FrameOfCopy())
    with signals_interrupt() as stops:
        stops.handle(signal.SIGINT, frames[0])  # recorded, not raised there
        with pytest.raises(Interrupted) as stopped:
            time.sleep(2)  # the retry lands here, in this module's frame
    assert stopped.value.exit_status == 130


EXITING = """
import os, signal, sys, time
from wanjax.entrypoints.interrupts import end_at_once_on_signals, run_to_exit
end_at_once_on_signals()  # as the `wanjax` program starts
run_to_exit(lambda: 0)  # the run ended (its output renamed into place)
os.kill(os.getpid(), signal.SIGTERM)  # as the process exits (JAX's teardown takes seconds)
time.sleep(5)
"""


def test_a_signal_after_the_run_ended_does_not_claim_no_output_was_left():
    ended = subprocess.run([sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=60)
    assert ended.returncode == 128 + signal.SIGTERM
    assert ended.stderr.strip() == "wanjax: stopped by SIGTERM while exiting; the run had ended, and any output it wrote is complete"
