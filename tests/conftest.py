"""Test session setup: JAX is initialised before torch is imported (see STYLE.md)."""

import os
from pathlib import Path

import jax  # noqa: F401  (import order matters: jax first, then torch)
import numpy as np
import pytest
import torch

torch.set_num_threads(2)

FAST_COMPILE = "--xla_backend_optimization_level=0"
"""The default run compiles with LLVM's optimisations off: compilation, not execution, is most of
the suite's time (a tiny VAE's tiled decode: 35 CPU s to compile and run at the default level,
11 s at this one; tests/parity/test_vae_chunking.py 5.5 instead of 12.5 minutes). XLA's HLO
passes, hence the sharding, collectives and buffers the tests inspect, are the same; floating
point is not reassociated at either level (fast math is off). Benchmark runs keep the default."""

TORCH_THREADS = 1
"""The default run's torch references are tiny: each op is microseconds of work, and with a second
thread it also waits for that thread to be scheduled, on cores the xdist workers and JAX already
fill (measured under load: 4.5 ms per tiny linear; tests/parity/test_dbcache_parity.py 30 s with
two threads, 18-21 s with one). Benchmark runs keep two (docs/performance.md's diffusers timings)."""


@pytest.fixture(scope="session", autouse=True)
def session_compilation_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One persistent compilation cache for this worker process, on before the first compile:
    the many tests that build the same tiny models compile each program once and read it back
    afterwards. JAX fixes the folder at the first compile, so the CLI's own setting (called
    in-process by CLI tests) does not move it; `compile_counter` counts the reads as compiles.
    Not shared by the workers: JAX locks its cache files only when the cache has a size limit,
    and then walks the whole folder at every write (measured: 0.14 s per write at the run's
    5,000 executables, several CPU minutes in all)."""
    from wanjax.adapters.jax.platform.compilation_cache import enable_compilation_cache

    enable_compilation_cache(tmp_path_factory.mktemp("xla-cache"))


def pytest_configure(config: pytest.Config) -> None:
    flags = os.environ.get("XLA_FLAGS", "")
    if config.getoption("benchmark_skip", default=False) and "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {FAST_COMPILE}".strip()  # read when JAX first makes its CPU backend;
        # the subprocesses tests start inherit it
    if config.getoption("benchmark_skip", default=False):
        torch.set_num_threads(TORCH_THREADS)
        os.environ["OMP_NUM_THREADS"] = str(TORCH_THREADS)  # the servers and CLIs tests start too: a video
        # they make must equal this process's bytes, and torch's fp32 sums depend on its thread count


@pytest.fixture(scope="module", autouse=True)
def torch_threads_as_configured(request: pytest.FixtureRequest) -> None:
    """Every test file starts with torch on the run's threads, whatever a file before it in this
    worker set: a video made here is compared byte for byte with one a server or CLI subprocess
    makes on OMP_NUM_THREADS, and the text encoder's fp32 sums depend on the thread count."""
    if request.config.getoption("benchmark_skip", default=False) and torch.get_num_threads() != TORCH_THREADS:
        torch.set_num_threads(TORCH_THREADS)


LONGEST_FILES = (
    "integration/test_device_check.py",  # with WANJAX_DEVICE_SMOKE=1 (CI)
    "parity/test_vae_chunking.py",
    "integration/test_server.py",
    "integration/test_signals.py",
    "integration/test_sharded_vae.py",
    "integration/test_speed_options.py",
    "integration/test_cache_policies.py",
    "integration/test_bench_command.py",
    "unit/test_offload.py",
    "integration/test_sharded_generation.py",
    "integration/test_diffusers_folders.py",
    "integration/test_multihost.py",
    "integration/test_determinism.py",
    "integration/test_memory_plan.py",
    "unit/test_denoise_loops.py",
    "parity/test_official_animate_pipeline_parity.py",
    "parity/test_animate_pipeline_parity.py",
)
"""The files that take minutes on a 2-core machine (`--durations=0`, 2026-11-26: 1 to 5 minutes
each under load), longest first. They are collected first: scripts/test hands whole files to its
two workers in collection order (--dist loadfile --no-loadscope-reorder), so the long ones start early and the workers end
together, rather than one worker running a long file alone at the end (pytest-xdist's default
order, by number of tests, put the 3-test memory-plan file near the end)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {Path(__file__).parent / name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))  # stable: the rest keep their order


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny diffusers-format Wan 2.1 T2V checkpoint (random weights), written once per session."""
    from tiny_wan import write_tiny_wan_checkpoint

    return write_tiny_wan_checkpoint(tmp_path_factory.mktemp("tiny-wan"))


@pytest.fixture(scope="session")
def demo_cache(tmp_path_factory):
    """The built-in demo checkpoint written into a session cache folder."""
    from wanjax.adapters.demo.checkpoint import ensure_demo_checkpoint

    return ensure_demo_checkpoint(tmp_path_factory.mktemp("wanjax-cache"))


@pytest.fixture(scope="session")
def tiny_a14b_checkpoint(tmp_path_factory):
    """A tiny Wan 2.2 A14B-style checkpoint: two experts, boundary_ratio 0.875 in model_index.json."""
    from tiny_wan import write_tiny_wan_checkpoint

    return write_tiny_wan_checkpoint(tmp_path_factory.mktemp("tiny-a14b"), boundary_ratio=0.875)


@pytest.fixture(scope="session")
def tiny_i2v_checkpoint(tmp_path_factory):
    """A tiny Wan 2.1 I2V checkpoint: CLIP image encoder, image cross-attention, 36 input channels."""
    from tiny_wan import tiny_wan_i2v_pipeline

    folder = tmp_path_factory.mktemp("tiny-i2v")
    tiny_wan_i2v_pipeline().save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_animate_checkpoint(tmp_path_factory):
    """A tiny Wan 2.2 Animate checkpoint: the I2V one's parts, with pose, motion and face blocks (faces of 16x16)."""
    from tiny_wan import tiny_wan_animate_pipeline

    folder = tmp_path_factory.mktemp("tiny-animate")
    tiny_wan_animate_pipeline().save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_s2v_checkpoint(tmp_path_factory):
    """A tiny official-format Wan 2.2 S2V folder (tests/official_folders.py): a 2-block WanModel_S2V,
    the Wan 2.1 VAE, T5 and a tiny wav2vec2 as its speech encoder; runs take max_sequence_length=16."""
    from official_folders import write_s2v_folder

    return write_s2v_folder(tmp_path_factory.mktemp("tiny-s2v"))[0]


@pytest.fixture(scope="session")
def tiny_flf2v_checkpoint(tmp_path_factory):
    """A tiny Wan 2.1 FLF2V checkpoint: the I2V one plus a position embedding over two images' CLIP tokens."""
    from tiny_wan import tiny_wan_i2v_pipeline

    folder = tmp_path_factory.mktemp("tiny-flf2v")
    tiny_wan_i2v_pipeline(last_frame=True).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_i2v_a14b_checkpoint(tmp_path_factory):
    """A tiny Wan 2.2 I2V A14B checkpoint: two experts, boundary 0.9, no image encoder."""
    from tiny_wan import tiny_wan_i2v_pipeline

    folder = tmp_path_factory.mktemp("tiny-i2v-a14b")
    tiny_wan_i2v_pipeline(boundary_ratio=0.9).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_ti2v_checkpoint(tmp_path_factory):
    """A tiny Wan 2.2 TI2V-style checkpoint: the Wan 2.2 VAE and expand_timesteps."""
    from tiny_wan import tiny_wan_ti2v_pipeline

    folder = tmp_path_factory.mktemp("tiny-ti2v")
    tiny_wan_ti2v_pipeline().save_pretrained(folder)
    return folder


class CompileCounter:
    """Counts the executables this process had to get anew: XLA backend compilations plus reads
    from the session's persistent compilation cache (JAX's monitoring events). A retrace that
    found its executable on disk counts as one, as it would with the cache off."""

    COMPILED = "/jax/core/compile/backend_compile_duration"
    READ_FROM_DISK = "/jax/compilation_cache/cache_hits"

    def __init__(self) -> None:
        self.count = 0
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)
        jax.monitoring.register_event_listener(self._on_event)

    def _on_duration(self, event: str, duration: float, **kwargs) -> None:
        if event == self.COMPILED:
            self.count += 1

    def _on_event(self, event: str, **kwargs) -> None:
        if event == self.READ_FROM_DISK:
            self.count += 1


@pytest.fixture(scope="session")
def compile_counter() -> CompileCounter:
    return CompileCounter()


@pytest.fixture(scope="session")
def eight_devices():
    """The process with 8 virtual CPU devices that runs this worker's mesh checks (tests/eight_devices.py)."""
    from eight_devices import EightDevices

    devices = EightDevices()
    yield devices
    devices.close()
