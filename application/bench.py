"""`wanjax bench`: a preset's real transformer (and optionally VAE) with random weights, timed.

No checkpoint is read: the architecture comes from the published table (or the demo's own),
the weights are made on the device. Every input is validated, and so are the optional
diffusers comparison's requirements, before anything is built.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import numpy as np

from wanjax.application.builders import DEMO_MODEL, default_platform, transformer_runtime, vae_runtime
from wanjax.application.container import build_container
from wanjax.application.memory import planned_on_this_device
from wanjax.application.presets import preset_names, resolve_config
from wanjax.domain.architectures import ARCHITECTURES, Architecture, published_architecture
from wanjax.domain.bench import BenchResult, DiffusersSteps, Peak
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.devices import device_peak
from wanjax.domain.errors import ConfigError
from wanjax.domain.flops import transformer_flops_per_step
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.memory import Workload, check_fits, moved_bytes
from wanjax.domain.modes.base import ModelTraits, ReceivedShapes
from wanjax.domain.modes.registry import default_mode
from wanjax.domain.offload import AUTO, least_offload, moves_components, streams_blocks
from wanjax.domain.plan import SamplingPlan, plan_sampling
from wanjax.domain.quantization import PACKED_BLOCKS, STORED_KERNELS, bytes_per_value
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import VaeSpec
from wanjax.domain.scheduling import MAX_INFERENCE_STEPS

if TYPE_CHECKING:
    from wanjax.adapters.jax.bench import DenoiseTiming, DeviceInfo

DEFAULT_STEPS = 3
# n of the measured [n, n] @ [n, n] ceiling: big enough to reach a CPU's peak in a fraction of a second,
# and (for accelerators missing from the datasheet table) a GPU's
CPU_CEILING_SIZE, CEILING_SIZE = 2048, 16384
COMPILE_BACKEND = "inductor"  # torch.compile's default: what PyTorch users deploy


@attrs.frozen(kw_only=True)
class BenchOptions:
    """What to run: a preset (or published repo id), optionally cut to `layers` layers, at its own
    size unless given, with its attention and dtype unless given."""

    model: str = DEMO_MODEL
    layers: int | None = None
    steps: int = DEFAULT_STEPS
    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    attention: str | None = None
    dtype: str | None = None
    vae: bool = False
    vs: str | None = None
    """A baseline timed on the same shapes first (BASELINES): diffusers eager, or eager and compiled."""
    overrides: dict[str, object] = attrs.field(factory=dict)
    """Any config key (`--set`), e.g. weights_dtype=float8_e4m3fn or vae_convolution=3d."""
    kernels: str | None = None
    """The blocks' kernels stored as a quantized file keeps them (a GGUF block type such as Q4_K, or
    scaled_fp8), random; None: as `weights_dtype` says."""
    profile_dir: Path | None = None
    """Where JAX's profiler writes a trace of the timed steps (None: no profiling)."""
    latents_out: Path | None = None
    """Where the run's final latents [1, F', H', W', C] (one video) go as a float32 .npy (None: nowhere): two
    runs that differ in a numeric setting (matmul_dtype, weights_dtype) compare through them."""


@attrs.frozen(kw_only=True)
class BenchPlan:
    """A validated benchmark: nothing built yet."""

    settings: GenerationConfig
    """Resolved for this platform: `dtype` and `attention` are what runs."""
    architecture: Architecture
    kernels: str | None = None
    request: GenerationRequest
    geometry: LatentGeometry
    plan: SamplingPlan  # the timed steps and one more
    vae: bool = False
    """Whether one VAE decode of the latents runs (and is planned) after the steps."""

    @property
    def dtype(self) -> str:
        return self.settings.model.dtype

    @property
    def copies(self) -> int:
        """Transformer rows per video: 2 under classifier-free guidance (conditional, unconditional)."""
        return 2 if self.request.uses_guidance else 1

    @property
    def flops_per_step(self) -> int:
        g, a = self.geometry, self.architecture
        return transformer_flops_per_step(
            a.transformer, g.frames, g.height, g.width, self.settings.text_encoder.max_sequence_length, self.copies,
            a.image_tokens, kv_cached=self.settings.denoiser.use_kv_cache,
        )  # fmt: skip


def plan_bench(options: BenchOptions) -> BenchPlan:
    """Validates `options` into a plan; a bad one raises a WanjaxError naming the fix."""
    if options.model not in preset_names() and options.model not in ARCHITECTURES:
        raise ConfigError(
            f"bench --model {options.model!r}: give a preset ({', '.join(preset_names())}) "
            f"or a published repo id ({', '.join(ARCHITECTURES)})"
        )
    if options.kernels is not None and options.kernels not in STORED_KERNELS:
        raise ConfigError(f"--kernels {options.kernels}: one of {', '.join(STORED_KERNELS)}")
    if not 1 <= options.steps < MAX_INFERENCE_STEPS:  # the plan holds one step more
        raise ConfigError(f"--steps {options.steps}: must be from 1 to {MAX_INFERENCE_STEPS - 1}")
    flags = {key: getattr(options, key) for key in ("attention", "dtype") if getattr(options, key) is not None}
    overrides = {**options.overrides, **flags}
    config = resolve_config(options.model, overrides, read_checkpoint=False)  # no checkpoint: random weights
    architecture = _with_layers(_architecture(config.model.location), options.layers)
    request = attrs.evolve(
        config.request(
            "benchmark", height=options.height, width=options.width, num_frames=options.num_frames,
            num_inference_steps=options.steps,
        ),
        sample_timesteps=None, expert_switch_step=None,  # --steps decides
    )  # fmt: skip
    request.cache.check_model(architecture.transformer)
    geometry = LatentGeometry.of(request, architecture.transformer, architecture.vae)
    experts = dict(num_experts=architecture.num_experts, model_boundary_ratio=architecture.boundary_ratio)
    # one step more than timed: the first also builds the KV cache and moves the inputs in
    plan = plan_sampling(attrs.evolve(request, num_inference_steps=options.steps + 1), **experts)
    spec = architecture.transformer
    size = PACKED_BLOCKS.get(options.kernels, (1, 0))[0]
    if spec.inner_dim % size or spec.ffn_dim % size:
        raise ConfigError(f"--kernels {options.kernels} packs rows of {size} values; {options.model}'s are not")
    return BenchPlan(
        settings=config.resolved(default_platform()), architecture=architecture, kernels=options.kernels,
        request=request, geometry=geometry, plan=plan, vae=options.vae,
    )  # fmt: skip


def _architecture(model: str) -> Architecture:
    if model == DEMO_MODEL:
        from wanjax.adapters.demo.checkpoint import DEMO_ARCHITECTURE

        return DEMO_ARCHITECTURE
    return published_architecture(model)


def _with_layers(architecture: Architecture, layers: int | None) -> Architecture:
    """The first `layers` blocks, each extension cut to them (a VACE model keeps the VACE blocks of
    those: hint points below `layers`)."""
    if layers is None:
        return architecture
    most = architecture.transformer.num_layers
    if not 1 <= layers <= most:
        raise ConfigError(f"--layers {layers}: must be between 1 and {most}, the layers of this architecture")
    spec = architecture.transformer
    cut = {key: value for extension in spec.extensions for key, value in extension.cut(spec, layers).items()}
    return attrs.evolve(architecture, transformer=attrs.evolve(spec, num_layers=layers, **cut))


def bench_workload(bench: BenchPlan) -> Workload:
    """What the timed transformer steps hold in memory, and with --vae the decode after them."""
    denoiser, architecture, vae = bench.settings.denoiser, bench.architecture, bench.settings.vae
    request, geometry = bench.request, bench.geometry
    decode = dict(
        vae=architecture.vae, vae_parameters=_vae_parameters(architecture.vae), vae_dtype=vae.dtype,
        vae_decode_chunk=vae.decode_chunk, latent_frames=geometry.frames, pixels=request.height * request.width,
        vae_tile=vae.tile, vae_convolution=vae.convolution,
    ) if bench.vae else {}  # fmt: skip
    return Workload(
        transformer=architecture.transformer, num_experts=architecture.num_experts, rows=bench.copies,
        tokens=bench.geometry.sequence_tokens(architecture.transformer),
        text_tokens=bench.settings.text_encoder.max_sequence_length, image_tokens=architecture.image_tokens,
        weights_dtype=denoiser.weights_dtype, activations_dtype=denoiser.activations_dtype,
        attention=denoiser.attention, kv_cache=denoiser.use_kv_cache, offload=denoiser.offload, **decode,
        packed_kernel_bytes=None if bench.kernels is None else bytes_per_value(bench.kernels),
        step_cache=request.cache.held(),
    )  # fmt: skip


def _vae_parameters(spec: VaeSpec) -> int:
    from wanjax.adapters.jax.bench import vae_parameter_count

    return vae_parameter_count(spec)


def run_bench(options: BenchOptions) -> BenchResult:
    """Validates, checks the memory plan, then builds the model(s) with random weights on the
    default device and times them."""
    bench = plan_bench(options)
    work = bench_workload(bench)
    if work.offload == AUTO:
        offload, _ = least_offload(lambda choice: planned_on_this_device(attrs.evolve(work, offload=choice)))
        work = attrs.evolve(work, offload=offload)
    memory_plan = planned_on_this_device(work)
    check_fits(memory_plan, work)
    diffusers_device = _diffusers_device() if options.vs is not None else None
    diffusers, compiled, diffusers_decode = None, None, None
    if diffusers_device is not None:  # first, in its own processes: their memory is gone before JAX's grows
        diffusers = _diffusers_steps(bench, diffusers_device)
        if options.vs == "diffusers-compiled":
            compiled = _diffusers_steps(bench, diffusers_device, compile_backend=COMPILE_BACKEND)
        diffusers_decode = _diffusers_decode(bench, diffusers_device) if options.vae else None
    from wanjax.adapters.jax import bench as jax_bench

    timing = _time_transformer(bench, work.offload, options.profile_dir)
    memory = jax_bench.peak_memory()  # before the VAE and the ceiling's matmul add theirs
    if options.latents_out is not None:
        _write_latents(np.asarray(timing.latents, np.float32), options.latents_out)
    decode, run_memory = None, memory
    if options.vae:
        vae = jax_bench.random_vae(bench.architecture.vae, vae_runtime(bench.settings.vae))
        decode = jax_bench.time_decode(vae, timing.latents, off_device=moves_components(work.offload))
        after = jax_bench.peak_memory()  # on CPU the decode's measurement restarted the peak: the larger
        run_memory = attrs.evolve(after, bytes=max(memory.bytes, after.bytes))
    device = jax_bench.default_device()
    peak = _peak(device, bench.dtype)
    moved = moved_bytes(work, bench.request.num_inference_steps)
    return BenchResult(
        device=device.name,
        model=options.model,
        layers=bench.architecture.transformer.num_layers,
        shape=_shape(bench),
        dtype=bench.dtype,
        weights_dtype=bench.kernels or bench.settings.denoiser.weights_dtype,
        attention=bench.settings.denoiser.attention,  # what ran: `auto` resolved
        steps=bench.request.num_inference_steps,
        seconds_per_step=timing.seconds_per_step,
        flops_per_step=bench.flops_per_step,
        peak=peak,
        memory=memory,
        run_memory=run_memory,
        planned_memory_bytes=memory_plan.peak,
        compile_seconds=timing.compile_seconds,
        vae_seconds=None if decode is None else decode.seconds,
        vae_compile_seconds=None if decode is None else decode.compile_seconds,
        vae_memory=None if decode is None else decode.memory,
        diffusers_vae_seconds=diffusers_decode,
        diffusers=diffusers,
        diffusers_compiled=compiled,
        diffusers_device=diffusers_device,
        offload=work.offload,
        offload_bytes_per_step=moved[0],
        offload_bytes_per_run=moved[1],
        weights_to_device_seconds=timing.weights_to_device_seconds,
        cache_policy=bench.plan.cache.policy,
        steps_skipped=int((~timing.cache_report.blocks_ran[1:]).sum()),
        mean_seconds_per_step=float(np.mean(timing.step_seconds)),
    )


def _time_transformer(bench: BenchPlan, offload: str, profile_dir: Path | None = None) -> DenoiseTiming:
    """The guided steps; the experts' weights are freed on return, before the VAE's are made."""
    from wanjax.adapters.jax.bench import random_transformer, time_denoising
    from wanjax.adapters.jax.denoising.program import DenoiserOptions
    from wanjax.adapters.jax.platform.dtypes import jax_dtype

    settings, architecture = bench.settings, bench.architecture
    attention = build_container(settings).attention()
    runtime = transformer_runtime(settings.denoiser, settings.model.dtype, attention, None, None)
    denoiser = settings.denoiser
    kernels = jax_dtype(denoiser.weights_dtype) if denoiser.is_fp8 else None  # as ExpertLoading stores them
    experts = [
        random_transformer(
            architecture.transformer, runtime, seed, kernel_dtype=kernels, stored_kernels=bench.kernels,
            blocks_in_host_memory=streams_blocks(offload), all_in_host_memory=moves_components(offload),
        )  # fmt: skip
        for seed in range(architecture.num_experts)
    ]
    options = DenoiserOptions(
        use_kv_cache=denoiser.use_kv_cache, scheduler_dtype=jax_dtype(denoiser.scheduler_dtype),
        stream_blocks=streams_blocks(offload), experts_off_device=moves_components(offload),
    )  # fmt: skip
    context, negative, conditioning = _inputs(bench)
    shape = bench.geometry.shape
    return time_denoising(experts, options, bench.plan, shape, context, negative, conditioning, profile_dir)


def _inputs(bench: BenchPlan) -> tuple[np.ndarray, np.ndarray | None, Conditioning]:
    """Random text embeddings [1, L, text_dim] (and the negative prompt's under guidance) and random
    conditioning of the shapes the model's default mode gives it (`GenerationMode.received`: an
    image-to-video model's image channels and CLIP tokens, a VACE model's control latents)."""
    rng = np.random.default_rng(0)
    a, g = bench.architecture, bench.geometry
    text = (1, bench.settings.text_encoder.max_sequence_length, a.transformer.text_dim)
    context = rng.standard_normal(text, dtype=np.float32)
    negative = rng.standard_normal(text, dtype=np.float32) if bench.request.uses_guidance else None
    mode = default_mode(ModelTraits(transformer=a.transformer, vae=a.vae, image_conditioning=a.image_conditioning))
    shapes = ReceivedShapes(
        transformer=a.transformer, vae=a.vae, latent_grid=(g.frames, g.height, g.width), image_tokens=a.image_tokens
    )
    received = mode.received(shapes)  # drawn in Conditioning's order (fields, then extension inputs)
    conditioning = received.map(lambda shape, split: rng.standard_normal(shape, dtype=np.float32))
    return context, negative, conditioning


def _shape(bench: BenchPlan) -> dict[str, object]:
    r, g = bench.request, bench.geometry
    latents = [bench.copies, g.frames, g.height, g.width, bench.architecture.transformer.in_channels]
    return {"height": r.height, "width": r.width, "num_frames": r.num_frames, "latents": latents}


def _peak(device: DeviceInfo, dtype: str) -> Peak:
    """The datasheet peak of a listed accelerator, else a measured matmul ceiling (CPUs)."""
    from wanjax.adapters.jax.bench import measured_matmul_flops
    from wanjax.adapters.jax.platform.dtypes import jax_dtype

    listed = device_peak(device.kind) if device.platform != "cpu" else None
    if listed is not None:
        return Peak(flops=listed.flops(dtype), source=f"datasheet, {dtype}")
    n = CPU_CEILING_SIZE if device.platform == "cpu" else CEILING_SIZE
    return Peak(flops=measured_matmul_flops(jax_dtype(dtype), n), source=f"measured, [{n}, {n}] {dtype} matmul")


def _diffusers_device() -> str:
    from wanjax.adapters.jax.bench import default_device
    from wanjax.adapters.torch.diffusers_bench import require_diffusers, torch_device

    require_diffusers()
    return torch_device(default_device().platform)


def _diffusers_steps(bench: BenchPlan, device: str, compile_backend: str | None = None) -> DiffusersSteps:
    from wanjax.adapters.torch.diffusers_bench import run_apart, time_diffusers_steps

    g = bench.geometry
    return run_apart(
        time_diffusers_steps,
        bench.architecture.transformer, (bench.copies, g.frames, g.height, g.width, g.channels),
        bench.settings.text_encoder.max_sequence_length, bench.architecture.image_tokens,
        guidance_scale=bench.request.guidance_scale, dtype=bench.dtype, device=device,
        steps=bench.request.num_inference_steps, compile_backend=compile_backend,
    )  # fmt: skip


def _diffusers_decode(bench: BenchPlan, device: str) -> tuple[float, float]:
    """diffusers' decode of latents of the run's shape (one video), untiled then tiled, each in its own process."""
    from wanjax.adapters.torch.diffusers_bench import run_apart, time_diffusers_decode

    g, vae = bench.geometry, bench.architecture.vae
    shape = (1, g.frames, g.height, g.width, vae.z_dim)
    untiled, tiled = (run_apart(time_diffusers_decode, vae, shape, tiled=t, device=device) for t in (False, True))
    return untiled, tiled


def _write_latents(latents: np.ndarray, path: Path) -> None:
    from wanjax.adapters.media.atomic import atomic_path

    with atomic_path(Path(path)) as temporary, open(temporary, "wb") as file:
        np.save(file, latents)


def write_bench_json(result: BenchResult, path: Path) -> None:
    """The result as one JSON object, written under a temporary name and renamed into place."""
    from wanjax.adapters.media.atomic import atomic_path

    with atomic_path(Path(path)) as temporary:
        temporary.write_text(json.dumps(result.as_json(), indent=2) + "\n")
