"""How the check's stages run wanjax: its CLI in a fresh process of this Python, a failure raised
with the command and the end of its error output."""

from __future__ import annotations

import os
import subprocess
import sys

WANJAX = [sys.executable, "-m", "wanjax.entrypoints.cli"]
SMOKE_STEPS = 1  # every bench stage's timed steps in the smoke run


def run(argv: list[str], env: dict[str, str] | None = None) -> str:
    """Runs `argv` to its end; its standard output, or a RuntimeError where it exits non-zero."""
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stdout
