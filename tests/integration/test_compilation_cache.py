"""JAX's persistent compilation cache: a second process with the same config compiles nothing.

Each run is a fresh process (the cache setting is process-global and JAX reads it at the
first compilation), running the CLI with the counting listeners below installed. JAX
records its "backend compile" event around the cache lookup too, so an executable read
from the cache counts there and as a cache hit: compiled = executables - cache hits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

COUNTING_CLI = """
import json, sys, jax
counts = {"executables": 0, "seconds": 0.0, "cache_hits": 0}
def on_duration(event, duration, **kwargs):
    if event == "/jax/core/compile/backend_compile_duration":
        counts["executables"] += 1
        counts["seconds"] += duration
def on_event(event, **kwargs):
    if event == "/jax/compilation_cache/cache_hits":
        counts["cache_hits"] += 1
jax.monitoring.register_event_duration_secs_listener(on_duration)
jax.monitoring.register_event_listener(on_event)
from wanjax.entrypoints.cli import main
code = main(sys.argv[1:])
print("COUNTS " + json.dumps(counts))
sys.exit(code)
"""


def _run(args: list[str], env: dict[str, str]) -> dict[str, float]:
    command = [sys.executable, "-c", COUNTING_CLI, *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("COUNTS "))
    return json.loads(line.removeprefix("COUNTS "))


def test_second_process_compiles_nothing(tiny_checkpoint, tmp_path):
    env = {**os.environ, "WANJAX_CACHE": str(tmp_path / "cache"), "JAX_PLATFORMS": "cpu"}
    args = ["generate", "--model", str(tiny_checkpoint), "--prompt", "a fox", "--height", "32", "--width", "48",
            "--num-frames", "5", "--steps", "3", "--quiet", "--set", "max_sequence_length=8"]  # fmt: skip
    first = _run([*args, "--out", str(tmp_path / "first.npy")], env)
    second = _run([*args, "--out", str(tmp_path / "second.npy")], env)
    off = _run([*args, "--set", "compilation_cache_dir=none", "--out", str(tmp_path / "off.npy")], env)

    assert any((tmp_path / "cache" / "xla").iterdir())  # the default folder: $WANJAX_CACHE/xla
    assert first["executables"] > 0 and first["cache_hits"] == 0
    assert second["executables"] == first["executables"] and second["cache_hits"] == second["executables"]
    assert second["seconds"] < 0.25 * first["seconds"]  # reading executables, not compiling them
    assert off["executables"] == first["executables"] and off["cache_hits"] == 0
