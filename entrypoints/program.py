"""The `wanjax` program: takes SIGINT and SIGTERM before it imports the CLI, so that a signal
while the CLI loads (seconds on a loaded machine) ends it with the CLI's line and status rather
than a traceback. The CLI module itself sets no handler when imported (embedded use, tests)."""

from __future__ import annotations

from wanjax.entrypoints.interrupts import end_at_once_on_signals, run_to_exit


def main() -> int:
    end_at_once_on_signals()
    from wanjax.entrypoints.cli import main as cli_main

    return run_to_exit(cli_main)
