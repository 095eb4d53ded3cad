"""Timing the real Wan transformer and VAE with random weights: no checkpoint, no disk.

The weights are made by one jitted call, so they come into being on the device (a 14B
model never passes through host memory). Denoising runs through the production
`JaxDenoiser`, so a timed step is the step `wanjax generate` runs (transformer on the
guidance batch, guidance, solver update), compiled ahead of time by its `prepare`.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import resource
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path

import attrs
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.typing import DTypeLike

from wanjax.adapters.jax.vae.autoencoder import JaxVideoAutoencoder
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.denoising.program import DenoiserOptions, DenoisingProgram
from wanjax.adapters.jax.platform.packed_kernel import PackedKernel
from wanjax.adapters.jax.platform.residency import Residency
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.adapters.jax.transformer.offload import BLOCKS, in_host_memory
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, set_parameters, storage_layout
from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime
from wanjax.domain.bench import MemoryPeak
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.flops import matmul_flops
from wanjax.domain.plan import SamplingPlan
from wanjax.domain.quantization import SCALE_OFFSETS, bytes_per_value
from wanjax.domain.specs import TransformerSpec, VaeSpec


def random_transformer(
    spec: TransformerSpec,
    runtime: TransformerRuntime,
    seed: int = 0,
    kernel_dtype: DTypeLike | None = None,
    *,
    stored_kernels: str | None = None,
    blocks_in_host_memory: bool = False,
    all_in_host_memory: bool = False,
) -> WanTransformer:
    """The model with random weights made on the device, each parameter in the dtype a checkpoint
    would load it in: the model's own, or `kernel_dtype` (fp8) for the blocks' matmul kernels, or
    as a quantized file keeps them (`stored_kernels`: a GGUF block type or scaled fp8).
    `blocks_in_host_memory` (offload=layers): each block parameter [layers, ...] is made alone and
    moved to host memory before the next, so the device never holds all the blocks;
    `all_in_host_memory` (offload=components): every parameter so."""
    model = abstract_transformer(spec, runtime)
    kinds = None if stored_kernels is None else RandomKernels(stored_kernels)
    layout = dict(enumerate(storage_layout(model, kernel_dtype, kinds).items()))
    offloaded = {
        i for i, (path, _) in layout.items() if all_in_host_memory or (blocks_in_host_memory and path[0] == BLOCKS)
    }
    resident = {i: entry for i, entry in layout.items() if i not in offloaded}
    arrays = jax.jit(lambda: {p: _random_parameter(s, i, seed) for i, (p, s) in resident.items()})()
    for i in offloaded:
        path, s = layout[i]
        arrays[path] = jax.tree.map(in_host_memory, jax.jit(lambda s=s, i=i: _random_parameter(s, i, seed))())
    return set_parameters(model, arrays)


class RandomKernels:
    """Every block kernel stored as `kind` (a GGUF block type, or scaled fp8): the `PackedTensors` a
    file of random weights would be, for `random_transformer` to lay out its parameters by."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def block_type(self, name: str) -> str | None:
        return self.kind

    def packed(self, name: str) -> np.ndarray:
        raise NotImplementedError("random weights are made on the device, never read")

    def block_kernel_bytes(self) -> float | None:
        return bytes_per_value(self.kind)


def _random_parameter(abstract: object, index: int, seed: int) -> object:
    """Random values of a parameter's stored form: an array, GGUF blocks with small finite scales, or
    fp8 values with a unit scale."""
    if isinstance(abstract, PackedKernel):
        blocks = _random_blocks(abstract.blocks.shape, abstract.block_type, index, seed)
        return PackedKernel(blocks, abstract.block_type, abstract.dtype)
    if isinstance(abstract, ScaledKernel):
        values = _hashed_uniform(abstract.values.shape, abstract.values.dtype, index, seed)
        return ScaledKernel(values, jnp.ones(abstract.scale.shape, jnp.float32), abstract.dtype)
    return _hashed_uniform(abstract.shape, abstract.dtype, index, seed)


def _random_blocks(shape: tuple[int, ...], block_type: str, index: int, seed: int) -> jax.Array:
    """Random bytes, each float16 scale's exponent cut to at most 2^-12: the weights stay below about
    0.25 whatever the integers (neither step time nor memory depends on the values)."""
    offset = (index * 0x9E3779B9 + seed * 0x85EBCA6B) & 0xFFFFFFFF
    bits = jax.lax.iota(jnp.uint32, math.prod(shape)) + jnp.uint32(offset)
    bits = (bits ^ (bits >> 16)) * jnp.uint32(0x7FEB352D)
    bits = (bits ^ (bits >> 15)) * jnp.uint32(0x846CA68B)
    blocks = (bits >> 24).astype(jnp.uint8).reshape(shape)
    mask = np.full(shape[-1], 0xFF, np.uint8)
    for at in SCALE_OFFSETS[block_type]:
        mask[at + 1] = 0x8F  # the scale's high byte: sign, the exponent's two low bits, two mantissa bits
    return blocks & jnp.asarray(mask)


def random_vae(spec: VaeSpec, runtime: VaeRuntime, seed: int = 0) -> WanVAE:
    """The VAE with random weights made on the device."""
    return _with_random_weights(nnx.eval_shape(lambda: WanVAE(spec, runtime, rngs=nnx.Rngs(0))), seed)


def vae_parameter_count(spec: VaeSpec) -> int:
    """The VAE's parameters, from its abstract shapes (nothing is made)."""
    abstract = nnx.eval_shape(lambda: WanVAE(spec, VaeRuntime(), rngs=nnx.Rngs(0)))
    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(nnx.state(abstract, nnx.Param)))


def _with_random_weights(abstract: nnx.Module, seed: int) -> nnx.Module:
    """Fills an abstract (`nnx.eval_shape`) module in one jitted call, so the weights never pass
    through host memory. Not the modules' own initialisers: on a busy 2-core CPU, XLA took 87 s to
    compile those (threefry normals) for the demo VAE and 15 s for the 2-layer demo transformer;
    this counter hash, one small loop per parameter, 15 s and 3 s. Uniform values with variance
    1 / fan-in keep activations in range; neither step time nor memory depends on the values."""
    graphdef, state = nnx.split(abstract)
    leaves, treedef = jax.tree.flatten(state)
    fill = jax.jit(lambda: [_hashed_uniform(leaf.shape, leaf.dtype, i, seed) for i, leaf in enumerate(leaves)])
    return nnx.merge(graphdef, jax.tree.unflatten(treedef, fill()))


def _hashed_uniform(shape: tuple[int, ...], dtype: DTypeLike, index: int, seed: int) -> jax.Array:
    """Uniform in +-sqrt(3 / fan_in) (fan_in: the second-last axis, 1 for vectors) from a 32-bit
    integer hash (lowbias32) of each element's position, offset per parameter and seed."""
    offset = (index * 0x9E3779B9 + seed * 0x85EBCA6B) & 0xFFFFFFFF
    bits = jax.lax.iota(jnp.uint32, math.prod(shape)) + jnp.uint32(offset)
    bits = (bits ^ (bits >> 16)) * jnp.uint32(0x7FEB352D)
    bits = (bits ^ (bits >> 15)) * jnp.uint32(0x846CA68B)
    bits = bits ^ (bits >> 16)
    unit = (bits >> 8).astype(jnp.float32) * (2.0 / 2**24) - 1.0  # [-1, 1)
    fan_in = shape[-2] if len(shape) >= 2 else 1
    return (unit * (3.0 / fan_in) ** 0.5).reshape(shape).astype(dtype)


@attrs.frozen(kw_only=True)
class DenoiseTiming:
    """compile_seconds: compiling the step and the KV-cache builder. seconds_per_step: the fastest
    step after the first. latents: what the run made, [B, F', H', W', C] float32."""

    compile_seconds: float
    seconds_per_step: float
    latents: jax.Array
    weights_to_device_seconds: float | None = None
    """With experts moved on and off the device (offload=components): one expert's copy to the device."""
    step_seconds: tuple[float, ...] = ()
    """Every step's time after the first: with a step cache, skipped and computed steps differ."""
    cache_report: CacheRunReport | None = None
    """What each step of the plan (the untimed first included) ran under its step cache."""


def time_denoising(
    experts: Sequence[WanTransformer],
    options: DenoiserOptions,
    plan: SamplingPlan,
    latent_shape: tuple[int, ...],
    context: np.ndarray,
    negative_context: np.ndarray | None,
    conditioning: Conditioning = Conditioning(),
    profile_dir: Path | None = None,
) -> DenoiseTiming:
    """Compiles, then runs `plan` once, stamping the time as each step completes on the device.
    The first step also computes the KV cache and moves the inputs in, so a step's time is the
    shortest of the intervals after it (`plan` needs two steps at least). The Python loop runs,
    whatever `options` say, so every step is the same compiled executable. With `profile_dir`
    the steps run under JAX's profiler, which writes its trace there (a Perfetto JSON too)."""
    if plan.num_steps < 2:
        raise ValueError(f"plan has {plan.num_steps} steps: the first is not timed, so give two at least")
    denoiser = JaxDenoiser(experts, attrs.evolve(options, scan_diffusion_loop=False))
    latents = denoiser.noise(0, latent_shape)
    args = (context, negative_context)
    start = time.perf_counter()
    session = denoiser.session(plan, *args)
    session.prepare(latents, conditioning)
    compile_seconds = time.perf_counter() - start
    stamps: list[float] = []
    tracing = jax.profiler.trace(str(profile_dir), create_perfetto_trace=True) if profile_dir else nullcontext()
    with tracing:
        result = session.denoise(latents, lambda *_: stamps.append(time.perf_counter()), conditioning)
    report, result = result.cache_report, result.latents
    if denoiser.num_compiled != 1:  # a recompile inside the run would be timed as a step
        raise RuntimeError(f"the benchmark compiled {denoiser.num_compiled} denoising steps, expected 1")
    steps = [after - before for before, after in zip(stamps, stamps[1:])]
    moving = _expert_to_device_seconds(denoiser.program) if options.experts_off_device else None
    return DenoiseTiming(
        compile_seconds=compile_seconds, seconds_per_step=min(steps), latents=result, weights_to_device_seconds=moving,
        step_seconds=tuple(steps), cache_report=report,
    )  # fmt: skip


def _expert_to_device_seconds(program: DenoisingProgram) -> float:
    """The time to copy the first expert's weights from host to device memory, as at its first step."""
    start = time.perf_counter()
    jax.block_until_ready(program.working(0))
    seconds = time.perf_counter() - start
    program.release()
    return seconds


@attrs.frozen(kw_only=True)
class DecodeTiming:
    """memory: what the decode itself added at its peak (see `decode_peak`)."""

    compile_seconds: float
    seconds: float
    memory: MemoryPeak


def time_decode(vae: WanVAE, latents: jax.Array, *, off_device: bool = False) -> DecodeTiming:
    """One decode of `latents` to uint8 frames on the host, after its compile; `off_device`
    (offload=components): the VAE's weights wait in host memory, and the decode moves them in."""
    autoencoder = JaxVideoAutoencoder(vae, residency=Residency(off_device=off_device))
    start = time.perf_counter()
    executable = autoencoder.prepare(latents)
    compiled = time.perf_counter()
    memory = decode_peak(lambda: autoencoder.decode_to_uint8(latents), executable)
    return DecodeTiming(compile_seconds=compiled - start, seconds=time.perf_counter() - compiled, memory=memory)


def decode_peak(run: Callable[[], object], executable: jax.stages.Compiled) -> MemoryPeak:
    """Runs `run` and returns what it added at its peak: on Linux CPUs the resident high-water mark
    over the resident memory before it (VmHWM, reset through /proc/self/clear_refs, freed heap
    returned first; the reset also restarts the process's peak RSS); elsewhere XLA's buffer
    assignment of `executable` (temporaries and outputs)."""
    clear_refs = Path("/proc/self/clear_refs")
    if jax.devices()[0].platform != "cpu" or not clear_refs.exists():
        run()
        analysis = executable.memory_analysis()
        size = analysis.temp_size_in_bytes + analysis.output_size_in_bytes
        return MemoryPeak(bytes=size, source="XLA buffer assignment (temporaries and outputs)")
    ctypes.CDLL(None).malloc_trim(0)
    clear_refs.write_text("5")
    before = _status_bytes("VmRSS")
    run()
    return MemoryPeak(bytes=_status_bytes("VmHWM") - before, source="resident growth (VmHWM)")


def _status_bytes(field: str) -> int:
    """A /proc/self/status memory field, in bytes."""
    return 1024 * int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1))


@attrs.frozen(kw_only=True)
class DeviceInfo:
    """The device a benchmark runs on. name: e.g. "gpu: NVIDIA H100 80GB HBM3", "cpu: 2 cores"."""

    platform: str
    kind: str
    name: str


def default_device() -> DeviceInfo:
    device = jax.devices()[0]
    cores = f"{len(os.sched_getaffinity(0))} cores"
    name = f"cpu: {cores}" if device.platform == "cpu" else f"{device.platform}: {device.device_kind}"
    return DeviceInfo(platform=device.platform, kind=device.device_kind, name=name)


def peak_memory() -> MemoryPeak:
    """The default device allocator's peak so far; on CPU (no allocator statistics) the process's
    peak RSS, which also counts the Python runtime and everything else this process ever held."""
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        return MemoryPeak(bytes=int(stats["peak_bytes_in_use"]), source="device peak_bytes_in_use")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return MemoryPeak(bytes=rss if sys.platform == "darwin" else rss * 1024, source="process peak RSS")


def measured_matmul_flops(dtype: DTypeLike, n: int, repeats: int = 3) -> float:
    """The best FLOP/s of an [n, n] @ [n, n] matmul in `dtype` on the default device: the ceiling
    where no datasheet number is known (CPUs). The best of `repeats`, after one untimed call."""
    a, b = (jax.random.normal(jax.random.key(i), (n, n), dtype) for i in (0, 1))
    matmul = jax.jit(jnp.matmul).lower(a, b).compile()
    matmul(a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        matmul(a, b).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return matmul_flops(n, n, n) / best
