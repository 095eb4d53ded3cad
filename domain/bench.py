"""What `wanjax bench` measured, and the utilisation it implies.

Kept apart from how it is measured (adapters/jax/bench.py) so that the arithmetic (MFU =
FLOPs / seconds / peak) and the JSON keys have one home and can be tested without a device.
"""

from __future__ import annotations

from typing import Any

import attrs

# `bench --vs`: diffusers' eager steps, or those and the same model under torch.compile (minutes of compiling)
BASELINES = ("diffusers", "diffusers-compiled")


@attrs.frozen(kw_only=True)
class Peak:
    """A device's matmul ceiling in FLOP/s; `source` says whether it is a datasheet number or measured."""

    flops: float
    source: str


@attrs.frozen(kw_only=True)
class MemoryPeak:
    """Peak bytes and what they count: the device allocator's peak, or the process's peak RSS on CPU."""

    bytes: int
    source: str


@attrs.frozen(kw_only=True)
class DiffusersSteps:
    """diffusers' guided steps on the same shapes: eager, or under `torch.compile` (`compiled_with`
    names its backend; `compile_seconds` is its first call: tracing, code generation and one step);
    `attention` is its attention backend and, on CUDA, the kernels it launched."""

    seconds_per_step: float
    attention: str
    compile_seconds: float | None = None
    compiled_with: str | None = None


@attrs.frozen(kw_only=True)
class BenchResult:
    """One benchmark run: guided denoising steps of a model's transformer on one device.

    shape: the video (height, width, num_frames) and the latents the transformer runs on
    ([batch, F', H', W', C], batch 2 under classifier-free guidance).
    """

    device: str
    model: str
    layers: int
    shape: dict[str, Any]
    dtype: str
    weights_dtype: str
    attention: str
    steps: int
    seconds_per_step: float
    flops_per_step: int
    peak: Peak
    memory: MemoryPeak
    """After the steps, before the VAE."""
    run_memory: MemoryPeak
    """The whole run's, the VAE decode's included."""
    planned_memory_bytes: int
    compile_seconds: float
    vae_seconds: float | None = None
    vae_compile_seconds: float | None = None
    vae_memory: MemoryPeak | None = None
    """What the decode itself added at its peak."""
    diffusers_vae_seconds: tuple[float, float] | None = None
    """diffusers' decode of the same shape: untiled, tiled."""
    diffusers: DiffusersSteps | None = None
    """diffusers' eager steps (`--vs diffusers`)."""
    diffusers_compiled: DiffusersSteps | None = None
    """The same under torch.compile (`--vs diffusers-compiled`, beside the eager ones)."""
    diffusers_device: str | None = None
    offload: str = "none"
    offload_bytes_per_step: int = 0  # host -> device weight bytes of one step (offload=layers)
    offload_bytes_per_run: int = 0  # the same over the run's steps and each component's moves (components)
    weights_to_device_seconds: float | None = None  # offload=components: one expert's copy to the device
    cache_policy: str = "none"  # the step cache the steps ran under (`--set cache_policy=...`)
    steps_skipped: int = 0  # of the timed steps, those whose blocks the step cache skipped
    mean_seconds_per_step: float | None = None  # over the timed steps: what a step cache changes

    @property
    def flops_per_second(self) -> float:
        return self.flops_per_step / self.seconds_per_step

    @property
    def mfu(self) -> float:
        """Model FLOP utilisation: achieved matmul FLOP/s over the device's peak."""
        return self.flops_per_second / self.peak.flops

    @property
    def speedup_over_diffusers(self) -> float | None:
        return None if self.diffusers is None else self.diffusers.seconds_per_step / self.seconds_per_step

    @property
    def speedup_over_compiled_diffusers(self) -> float | None:
        if self.diffusers_compiled is None:
            return None
        return self.diffusers_compiled.seconds_per_step / self.seconds_per_step

    def as_json(self) -> dict[str, Any]:
        """The `--json` object: flat keys, plain numbers and strings."""
        record = {
            "device": self.device,
            "model": self.model,
            "layers": self.layers,
            "shape": self.shape,
            "dtype": self.dtype,
            "weights_dtype": self.weights_dtype,
            "attention": self.attention,
            "steps": self.steps,
            "seconds_per_step": self.seconds_per_step,
            "flops_per_step": self.flops_per_step,
            "flops_per_second": self.flops_per_second,
            "peak_flops": self.peak.flops,
            "peak_flops_source": self.peak.source,
            "mfu": self.mfu,
            "peak_memory_bytes": self.memory.bytes,
            "peak_memory_source": self.memory.source,
            "run_peak_memory_bytes": self.run_memory.bytes,
            "planned_peak_memory_bytes": self.planned_memory_bytes,
            "compile_seconds": self.compile_seconds,
            "cache_policy": self.cache_policy,
            "steps_skipped": self.steps_skipped,
            "mean_seconds_per_step": self.mean_seconds_per_step,
            "offload": self.offload,
            "offload_bytes_per_step": self.offload_bytes_per_step,
            "offload_bytes_per_run": self.offload_bytes_per_run,
        }
        if self.weights_to_device_seconds is not None:
            record.update(weights_to_device_seconds=self.weights_to_device_seconds)
        if self.vae_seconds is not None:
            record.update(vae_seconds=self.vae_seconds, vae_compile_seconds=self.vae_compile_seconds)
        if self.vae_memory is not None:
            record.update(vae_peak_memory_bytes=self.vae_memory.bytes, vae_peak_memory_source=self.vae_memory.source)
        if self.diffusers_vae_seconds is not None and self.vae_seconds is not None:
            untiled, tiled = self.diffusers_vae_seconds
            record.update(
                diffusers_vae_seconds=untiled, diffusers_vae_tiled_seconds=tiled,
                vae_speedup_over_diffusers=untiled / self.vae_seconds,
            )  # fmt: skip
        if self.diffusers is not None:
            record.update(
                diffusers_seconds_per_step=self.diffusers.seconds_per_step,
                diffusers_device=self.diffusers_device,
                diffusers_attention=self.diffusers.attention,
                speedup_over_diffusers=self.speedup_over_diffusers,
            )
        if self.diffusers_compiled is not None:
            record.update(
                diffusers_compiled_seconds_per_step=self.diffusers_compiled.seconds_per_step,
                diffusers_compile_seconds=self.diffusers_compiled.compile_seconds,
                diffusers_compiled_with=self.diffusers_compiled.compiled_with,
                diffusers_compiled_attention=self.diffusers_compiled.attention,
                speedup_over_compiled_diffusers=self.speedup_over_compiled_diffusers,
            )
        return record
