"""How much memory a generation may use on JAX's default device, for the memory plan."""

from __future__ import annotations

from pathlib import Path

import jax


def platform() -> str:
    """"cpu", "gpu" or "tpu": JAX's default backend."""
    return jax.default_backend()


def available_bytes() -> int | None:
    """Free memory of this process's first device (in a multi-process run only its own devices
    answer): its allocator's limit less what is in use; on CPU (no
    allocator stats) the machine's available memory plus what this process already holds,
    since the plan counts the process's own baseline. None where neither can be read."""
    stats = jax.local_devices()[0].memory_stats()
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return _host_available()


def host_available_bytes() -> int | None:
    """The machine's available host memory (MemAvailable), None where it cannot be read."""
    try:
        return _kib_field("/proc/meminfo", "MemAvailable")
    except (OSError, KeyError, ValueError):
        return None


def _host_available() -> int | None:
    try:
        return _kib_field("/proc/meminfo", "MemAvailable") + _kib_field("/proc/self/status", "VmRSS")
    except (OSError, KeyError, ValueError):
        return None


def _kib_field(path: str, name: str) -> int:
    """A "Name:   123 kB" line of a /proc file, in bytes."""
    fields = dict(line.split(":", 1) for line in Path(path).read_text().splitlines() if ":" in line)
    return int(fields[name].split()[0]) * 1024
