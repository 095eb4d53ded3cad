"""One long-lived Python process with 8 virtual CPU devices, shared by the tests that need a mesh.

JAX fixes its device count when it starts, so the pytest process (one CPU device) cannot build
a mesh. Each pytest worker starts this process once, on first use (the `eight_devices` session
fixture in conftest.py), and test files send it calls:

    eight_devices.call(__file__, "measure", *args)

imports that file in the device process and returns `measure(*args)`; arguments and result
travel as JSON. JAX, flax, torch and wanjax are imported once per pytest worker instead of once
per test file. Before each call the process clears JAX's in-memory compilation caches, so every
call compiles what a fresh process would (one file's compilation is never another's cache hit).
The functions run with `tests/` on sys.path, as the test files do.

A call that raises reports its traceback; one that kills the process reports the end of its
output, and the next call starts a new process.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent


class DeviceCallError(AssertionError):
    """A call that raised in the device process (its traceback is the message) or killed it."""


class EightDevices:
    """The pytest side: starts the device process and sends it calls, one at a time."""

    def __init__(self, timeout: float = 900.0) -> None:
        self.timeout = timeout
        self._process: subprocess.Popen | None = None
        self._log = None

    def call(self, path: str | Path, function: str, *args: Any) -> Any:
        process = self._started()
        request = json.dumps({"path": str(Path(path).resolve()), "function": function, "args": args})
        process.stdin.write(request + "\n")
        process.stdin.flush()
        line = self._reply(process)
        if line is None:
            self.close()  # dead or stuck: the next call starts a new process
            raise DeviceCallError(f"the 8-device process died or timed out in {function}:\n{self._log_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise DeviceCallError(f"{function} raised in the 8-device process:\n{reply['error']}")
        return reply["result"]

    def close(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            self._process = None

    def _started(self) -> subprocess.Popen:
        if self._process is None or self._process.poll() is not None:
            self._log = tempfile.TemporaryFile(mode="w+")
            self._process = subprocess.Popen(
                [sys.executable, __file__],
                env={**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": _with_eight_devices(os.environ.get("XLA_FLAGS", ""))},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                text=True,
            )
        return self._process

    def _reply(self, process: subprocess.Popen) -> str | None:
        deadline = time.monotonic() + self.timeout
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(timeout=max(0.0, deadline - time.monotonic())):
                    line = process.stdout.readline()
                    return line if line else None  # "" is end of file: the process ended
        return None

    def _log_tail(self) -> str:
        self._log.seek(0)
        return self._log.read()[-4000:]


def _with_eight_devices(flags: str) -> str:
    """The XLA flags given to the pytest process (conftest.py's included), plus 8 CPU devices."""
    return f"{flags} --xla_force_host_platform_device_count=8".strip()


# ---- the device process ---------------------------------------------------------------------


def _serve() -> None:
    replies = os.fdopen(os.dup(1), "w")  # the pipe to pytest carries replies only ...
    os.dup2(2, 1)  # ... whatever the calls print goes to the log
    sys.path.insert(0, str(TESTS))
    import jax  # before torch, as in conftest.py

    assert len(jax.devices()) == 8, jax.devices()
    modules: dict[str, Any] = {}
    for request in sys.stdin:
        call = json.loads(request)
        try:
            jax.clear_caches()
            module = modules.get(call["path"]) or _import(call["path"])
            modules[call["path"]] = module
            reply = {"result": getattr(module, call["function"])(*call["args"])}
        except Exception:  # noqa: BLE001  (the test reports it)
            import traceback

            reply = {"error": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def _import(path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"eight_devices_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    _serve()
