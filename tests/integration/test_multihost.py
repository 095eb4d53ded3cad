"""Two processes on this machine (jax.distributed, gloo CPU collectives, one CPU device each)
generate the demo video with CFG's conditional and unconditional rows split across them
(mesh_data=2): the same frames as one process alone. Process 0 writes; process 1 only logs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wanjax.adapters.jax.platform.distributed import process_group
from wanjax.domain.errors import ConfigError

GENERATE = [
    sys.executable, "-m", "wanjax.entrypoints.cli", "generate", "--prompt", "a fox", "--height", "32", "--width", "48",
    "--num-frames", "5", "--steps", "2", "--seed", "3", "--dtype", "float32", "--quiet",
    "--set", "compilation_cache_dir=none",
]  # fmt: skip
# Each process holds one row of the CFG pair and half of the VAE's rows: the same arithmetic
# per row, compiled for other shapes, so float32 values may differ in the last bits, which can
# flip a uint8 level sitting on a .5 boundary (as in test_sharded_vae.py).
UINT8_LEVELS = 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _environment(demo_cache: Path, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("JAX_")}
    return {**env, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "", "WANJAX_CACHE": str(demo_cache.parent), **extra}


def test_two_processes_generate_the_video_of_one(demo_cache, tmp_path):
    single = subprocess.run(
        [*GENERATE, "--out", str(tmp_path / "single.npy")],
        env=_environment(demo_cache), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert single.returncode == 0, single.stderr[-3000:]

    address = f"127.0.0.1:{_free_port()}"
    split = [*GENERATE, "--set", "mesh_data=2"]
    # process 0 from flags, process 1 from the environment variables: both routes work
    first = subprocess.Popen(
        [*split, "--out", str(tmp_path / "0.npy"), "--coordinator-address", address, "--num-processes", "2",
         "--process-id", "0"],
        env=_environment(demo_cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    second = subprocess.Popen(
        [*split, "--out", str(tmp_path / "1.npy")],
        env=_environment(demo_cache, JAX_COORDINATOR_ADDRESS=address, JAX_NUM_PROCESSES="2", JAX_PROCESS_ID="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    outputs = [process.communicate(timeout=600) for process in (first, second)]
    assert first.returncode == 0 and second.returncode == 0, [err[-3000:] for _, err in outputs]

    assert f"wrote {tmp_path / '0.npy'}" in outputs[0][0]
    assert not (tmp_path / "1.npy").exists() and "skipped writing" in outputs[1][1]
    alone, together = np.load(tmp_path / "single.npy"), np.load(tmp_path / "0.npy")
    assert together.shape == alone.shape == (1, 5, 32, 48, 3) and together.dtype == np.uint8
    assert np.abs(together.astype(int) - alone.astype(int)).max() <= UINT8_LEVELS


def test_process_group_from_flags_and_environment():
    environ = {"JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"}
    assert process_group({}) is None  # nothing set: one process, nothing initialised
    group = process_group(environ, process_id=0)  # a flag wins over its variable
    assert (group.coordinator_address, group.num_processes, group.process_id) == ("10.0.0.1:1234", 4, 0)


@pytest.mark.parametrize(
    ("environ", "flags", "message"),
    [
        ({"JAX_NUM_PROCESSES": "2"}, {}, "missing --coordinator-address or JAX_COORDINATOR_ADDRESS"),
        ({}, dict(coordinator_address="h:1", num_processes=2, process_id=2), r"process_id=2: must be in \[0, 2\)"),
        ({}, dict(coordinator_address="nohost", num_processes=2, process_id=0), "expected HOST:PORT"),
        ({"JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"}, dict(coordinator_address="h:1"), "num_processes='two'"),
        ({"JAX_NUM_PROCESSES": "٢", "JAX_PROCESS_ID": "0"}, dict(coordinator_address="h:1"), "num_processes='٢'"),
    ],
)
def test_incomplete_or_bad_process_group_is_a_config_error(environ, flags, message):
    with pytest.raises(ConfigError, match=message):
        process_group(environ, **flags)
