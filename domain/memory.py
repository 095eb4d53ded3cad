"""The memory plan: what a generation holds at its peak, estimated before anything loads.

A request that cannot fit is refused with the estimate and the settings that would make it
fit, instead of loading for minutes and dying in an allocator. Every term is arithmetic on
the specs, the request's geometry and the config; parameter counts come from the
checkpoint's headers (or the architecture, for `wanjax bench`).

Resident through the run: the transformer weights (every expert), with per-request LoRAs a
merged copy of them (at most all of them) and the LoRA factor cache, the VAE weights, the
text encoder where it shares the device's memory (CPU), the cross-attention KV cache and a
runtime baseline. On top of them, the largest phase's transient: one denoising step's
activations with the step cache's state (a cached residual, TaylorSeer's differences: each
policy says what it holds, domain/caching/policy.HeldState), the VAE decode's, or the VAE
encode's (where the request encodes a video or an image first). With `offload=components` a component's weights belong to the phase it works
in (the text encoder's to the text encoding, one expert and the KV cache to the denoising, the
VAE's to its encode and decode), so the peak is the largest phase, not the sum; the host then
holds every component's weights, listed apart (domain/offload.py).

The activation coefficients on CPU are XLA's own buffer assignment, fitted over the 1.3B,
5B and 14B architectures at 4680 and 9360 tokens (`compiled.memory_analysis()`, fp32,
scanned layers, blockwise attention; each term within 8% of it): per token and row, 38
bytes per unit of model width and 3.3 per unit of FFN width; plus the attention's live
logits. The CPU baseline is fitted to the peak resident memory of demo-model runs
(tests/integration/test_memory_plan.py). On a GPU the terms are fitted to the device peaks an
H200 recorded for bf16 guided steps of the 1.3B (10920 and 32760 tokens, 1 and 30 layers) and
the 14B (75600 tokens, bf16 and fp8 weights), each planned 1-7% above its peak
(tests/unit/test_gpu_step_plan.py holds them to the records in docs/benchmarks/).

The VAE's transients: domain/vae_memory.py.
"""

from __future__ import annotations

import math

import attrs

from wanjax.domain.attention import MATERIALISES_LOGITS
from wanjax.domain.block_parameters import base_parameters, block_parameters
from wanjax.domain.caching.policy import HeldState
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.extensions.base import ExtensionCost
from wanjax.domain.offload import OFFLOAD_ORDER, moves_components, streams_blocks
from wanjax.domain.sizes import DTYPE_BYTES
from wanjax.domain.specs import TransformerSpec, VaeSpec
from wanjax.domain.vae_memory import vae_decode_bytes, vae_encode_bytes

GIB = 2**30
STEP_BYTES_PER_WIDTH = 38.0  # per token, row and unit of inner_dim
STEP_BYTES_PER_FFN_WIDTH = 3.3  # per token, row and unit of ffn_dim
LOGIT_COPIES = 3  # logits, their exponentials and the probabilities cast for PV
CPU_BF16_UPCAST = 1.6  # XLA's CPU dots run bf16 in fp32: fp32 copies of ~1.6 layers' weights
# torch, transformers and the encoder's runtime in the process, where the text encoder shares the
# device's memory (CPU): demo runs with the encoder loaded peak 0.47 GiB above those without.
TEXT_ENCODER_RUNTIME = 480 * 2**20
# per token, row and unit of inner_dim / ffn_dim of a bf16 step on a GPU (fp32 activations: twice)
GPU_STEP_BYTES_PER_WIDTH, GPU_STEP_BYTES_PER_FFN_WIDTH = 8.0, 3.45
# The process's own memory beside the buffers: on CPU the interpreter, libraries and XLA; on a GPU what
# XLA's and cuDNN's workspaces take from the allocator (the CUDA context lies outside the allocator's
# limit, which is what a GPU plan is checked against).
RUNTIME_BASELINE = {"cpu": 370 * 2**20, "gpu": GIB // 4, "tpu": 1 * GIB}


@attrs.frozen(kw_only=True)
class Workload:
    """What one generation runs, in the terms the plan needs.

    rows: transformer batch (videos x 2 under guidance); tokens: video tokens per row;
    text_tokens / image_tokens: cross-attention keys; attention: the resolved backend and its
    (block_q, block_k); weight_shards / row_shards / token_shards: how a mesh divides the
    weights (fsdp x tensor), rows (data x fsdp) and tokens (context), and devices its size
    (the VAE decode splits frames spatially over all of them); request_lora_cache: with
    per-request LoRAs, their factor cache's bytes (else None); vae: None when no VAE
    runs (`wanjax bench` without --vae); pixels: height x width of the video; vae_convolution:
    the VAE's convolution form as resolved (`frames` or `3d`); vae_encode_frames: the video frames the VAE encodes first (0: none, text-to-video);
    held_frames: the decoded frames in host memory at once, every video's together: one segment's,
    since videos are written as each segment is decoded (0: not counted, as `wanjax bench`).
    """

    transformer: TransformerSpec
    num_experts: int = 1
    rows: int
    tokens: int
    text_tokens: int
    image_tokens: int = 0
    weights_dtype: str
    activations_dtype: str
    attention: str
    attention_blocks: tuple[int, int] = (1024, 512)
    kv_cache: bool = True
    vae: VaeSpec | None = None
    vae_parameters: int = 0
    vae_dtype: str = "float32"
    vae_decode_chunk: int | None = 1
    latent_frames: int = 1
    pixels: int = 0
    vae_tile: int | None = None
    vae_convolution: str = "frames"
    vae_encode_frames: int = 0
    vae_encode_chunk: int | None = 4
    held_frames: int = 0
    text_encoder_parameters: int = 0
    text_encoder_dtype: str = "float32"
    text_encoder_backend: str = "torch"
    # Of `text_encoder_parameters`, those the JAX encoder keeps in fp8 (a scaled fp8 file's Linear kernels
    # and token embedding: one byte each); the torch encoder dequantizes them into `text_encoder_dtype`.
    text_encoder_fp8_parameters: int = 0
    # Wan 2.2 S2V's wav2vec2 speech encoder: torch's, on the CPU whatever the platform, so in host memory
    # (on a CPU, the one memory) for the whole run.
    speech_encoder_parameters: int = 0
    speech_encoder_dtype: str = "float32"
    weight_shards: int = 1
    request_lora_cache: int | None = None
    row_shards: int = 1
    token_shards: int = 1
    devices: int = 1
    offload: str = "none"  # where the weights wait between their uses (domain/offload.py)
    # Bytes per value of the blocks' matmul kernels as a GGUF file's packed blocks keep them on the
    # device (Q4_K: 0.5625); None: as `weights_dtype` says.
    packed_kernel_bytes: float | None = None
    # The step cache's state (CacheSettings.held), carried from step to step through the denoising:
    # for `videos` videos (`rows` their guidance rows) whose timestep covers `time_tokens` tokens
    # each (1; every token with Wan 2.2 TI2V's first frame).
    step_cache: HeldState = HeldState()
    videos: int = 1
    time_tokens: int = 1


@attrs.frozen
class MemoryPlan:
    """The estimated device peak as named parts (bytes), against the memory there is (None:
    unknown); `host_parts` what stays in host memory meanwhile (offloaded weights), against
    `host_available`. On a CPU the two are one memory, and both count against `available`."""

    parts: tuple[tuple[str, int], ...]
    available: int | None
    where: str
    host_parts: tuple[tuple[str, int], ...] = ()
    host_available: int | None = None
    offload: str = "none"
    phases: tuple[tuple[str, int], ...] = ()  # each phase's device total; `parts` are the largest's
    peak_phase: str = ""
    auto: bool = False  # `offload` was chosen by offload=auto

    @property
    def peak(self) -> int:
        return sum(size for _, size in self.parts) + (self.host if self.where == "cpu" else 0)

    @property
    def host(self) -> int:
        return sum(size for _, size in self.host_parts)

    @property
    def fits_host(self) -> bool:
        return self.where == "cpu" or self.host_available is None or self.host <= self.host_available

    @property
    def fits(self) -> bool:
        return (self.available is None or self.peak <= self.available) and self.fits_host

    def summary(self) -> str:
        chosen = " (chosen by offload=auto: the least offload that fits)" if self.auto else ""
        lines = [f"memory plan ({self.where}, offload={self.offload}{chosen}):"]
        lines += [f"  {name:<34} {size / GIB:8.2f} GiB" for name, size in self.parts]
        lines.append(f"  {'estimated peak (' + self.peak_phase + ')':<34} {self.peak / GIB:8.2f} GiB")
        if self.available is not None:
            lines.append(f"  {'available':<34} {self.available / GIB:8.2f} GiB")
        if self.where != "cpu" and len(self.phases) > 1:
            lines.append("each phase's device total:")
            lines += [f"  {name:<34} {size / GIB:8.2f} GiB" for name, size in self.phases]
        if self.host_parts:
            lines.append("host memory:")
            lines += [f"  {name:<34} {size / GIB:8.2f} GiB" for name, size in self.host_parts]
            if self.host_available is not None:
                lines.append(f"  {'available':<34} {self.host_available / GIB:8.2f} GiB")
        return "\n".join(lines)


def transformer_parameters(spec: TransformerSpec) -> tuple[int, int]:
    """(all parameters, those of the matmul kernels fp8 storage stores: the blocks', and those of
    each extension's layer stacks) of one expert, as diffusers counts them."""
    total, kernels = base_parameters(spec)
    for cost in _extension_costs(spec):
        total, kernels = total + cost.parameters, kernels + cost.kernels
    return total, kernels


def _extension_costs(spec: TransformerSpec) -> list[ExtensionCost]:
    return [extension.cost(spec) for extension in spec.extensions]


def plan_memory(
    work: Workload, *, platform: str, available: int | None, host_available: int | None = None
) -> MemoryPlan:
    """The estimated peak of `work` on `platform` ("cpu", "gpu", "tpu"), parts named: what stays on
    the device for the whole run plus the largest phase's own parts (domain/offload.py says what
    each `offload` keeps in host memory, listed apart)."""
    resident, phases, host_parts = _placed_parts(work, platform)
    resident.append(("runtime baseline", RUNTIME_BASELINE.get(platform, GIB)))
    totals = tuple((name, sum(size for _, size in resident + parts)) for name, parts in phases.items())
    peak_phase = max(phases, key=lambda name: sum(size for _, size in phases[name]))
    parts = tuple(resident[:-1] + phases[peak_phase] + resident[-1:])
    return MemoryPlan(parts, available, platform, tuple(host_parts), host_available, work.offload, totals, peak_phase)


Parts = list[tuple[str, int]]


def _placed_parts(work: Workload, platform: str) -> tuple[Parts, dict[str, Parts], Parts]:
    """(parts on the device for the whole run, each phase's own parts, parts in host memory). A
    phase's transient activations are its own whatever the offload; with `components` so are the
    weights of the component working in it."""
    transformer, host = _transformer_parts(work)
    vae = [("VAE weights", work.vae_parameters * DTYPE_BYTES[work.vae_dtype])] if work.vae is not None else []
    text, movable_text = [], []
    if work.text_encoder_parameters and work.text_encoder_backend == "jax":  # torch's is in host memory off CPU
        movable_text = [("text encoder weights", _text_encoder_weights(work))]
    elif platform == "cpu" and work.text_encoder_parameters:
        text = [
            ("text encoder weights", _text_encoder_weights(work)),
            ("text encoder runtime (torch)", TEXT_ENCODER_RUNTIME),  # unless the prompts are cached
        ]
    if work.speech_encoder_parameters:
        speech = work.speech_encoder_parameters * DTYPE_BYTES[work.speech_encoder_dtype]
        host.append(("speech encoder weights (torch)", speech))
    if work.held_frames:  # uint8 RGB, one segment's whatever the video's length
        host.append(("decoded frames, one segment", work.held_frames * work.pixels * 3))
    if moves_components(work.offload):
        resident, own = text, {"text": movable_text, "denoising": transformer, "VAE": vae}
        host += vae + movable_text
    else:
        resident, own = transformer + vae + movable_text + text, {"text": [], "denoising": [], "VAE": []}
    phases = {"text encoding": own["text"]} if own["text"] else {}
    phases["denoising"] = own["denoising"] + [("denoising step activations", _step_activations(work, platform))]
    if work.step_cache != HeldState():
        phases["denoising"].append(("step cache state", step_cache_bytes(work)))
    if work.vae is not None:
        if work.vae_encode_frames:
            encode = vae_encode_bytes(
                work.vae, work.pixels, work.vae_encode_frames, work.vae_encode_chunk, work.vae_tile,
                dtype=work.vae_dtype, platform=platform,
            )  # fmt: skip
            phases["VAE encode"] = own["VAE"] + [("VAE encode activations", encode)]
        phases["VAE decode"] = own["VAE"] + [("VAE decode activations", _vae_decode(work, platform))]
    return resident, phases, host


def _transformer_parts(work: Workload) -> tuple[Parts, Parts]:
    """(the transformer's parts on the device while it denoises, its weights in host memory): every
    expert or one (`components`), each whole or its non-block weights and two blocks (`layers`)."""
    weights, blocks = _transformer_weights(work), block_weights(work)
    experts, streams = work.num_experts, streams_blocks(work.offload)
    working = 1 if moves_components(work.offload) else experts
    on_device = (weights - blocks) // experts * working
    on_device += 2 * blocks // (experts * work.transformer.num_layers) if streams else blocks // experts * working
    name = "transformer weights" + (", 2 blocks" if streams else ", one expert" if working < experts else "")
    parts = [(name, on_device)]
    if work.request_lora_cache is not None:  # the copy bounded by every weight a LoRA could change
        # quantized kernels are not copied: their factors sit beside them, about the cache's size again
        copy = weights if work.packed_kernel_bytes is None else work.request_lora_cache
        parts.append(("request LoRAs: merged copy, factor cache", copy + work.request_lora_cache))
    if work.kv_cache:
        parts.append(("cross-attention KV cache", _kv_cache(work)))
    if moves_components(work.offload):
        return parts, [("transformer weights", weights)]
    return parts, [("transformer blocks' weights", blocks)] if streams else []


def moved_bytes(work: Workload, steps: int) -> tuple[int, int]:
    """(bytes of weights copied from host to device memory in one denoising step, in a whole run of
    `steps` steps and the VAE's uses) under `work.offload`: `layers` copies one expert's blocks per step,
    the last one twice; `components` each expert once and the VAE once per use (encode, decode) and
    the JAX text encoder once; `all` both, the experts less their blocks."""
    per_step = 0
    if streams_blocks(work.offload):
        layers = work.transformer.num_layers
        per_step = block_weights(work) // work.num_experts * (layers + 1) // layers
    per_run = steps * per_step
    if moves_components(work.offload):
        weights = _transformer_weights(work)
        per_run += weights - block_weights(work) if streams_blocks(work.offload) else weights
        uses = (work.vae is not None) + (work.vae is not None and work.vae_encode_frames > 0)
        per_run += uses * work.vae_parameters * DTYPE_BYTES[work.vae_dtype]
        if work.text_encoder_backend == "jax":
            per_run += _text_encoder_weights(work)
    return per_step, per_run


def _text_encoder_weights(work: Workload) -> int:
    """The text encoder's weights' bytes as its backend holds them: the JAX one's fp8 values in fp8."""
    fp8 = work.text_encoder_fp8_parameters if work.text_encoder_backend == "jax" else 0
    return (work.text_encoder_parameters - fp8) * DTYPE_BYTES[work.text_encoder_dtype] + fp8


def _stored_bytes(work: Workload) -> tuple[float, int]:
    """Bytes per value of the blocks' matmul kernels, and of every other weight, as stored: fp8 kernels
    with the rest in the compute dtype, packed GGUF kernels, or everything in `weights_dtype`."""
    fp8 = work.weights_dtype == "float8_e4m3fn"
    rest = DTYPE_BYTES[work.activations_dtype if fp8 else work.weights_dtype]
    if work.packed_kernel_bytes is not None:
        return work.packed_kernel_bytes, rest
    return (1 if fp8 else rest), rest


def _transformer_weights(work: Workload) -> int:
    total, kernels = transformer_parameters(work.transformer)
    kernel_bytes, rest = _stored_bytes(work)
    size = int(kernels * kernel_bytes) + (total - kernels) * rest
    return work.num_experts * size // work.weight_shards


def block_weights(work: Workload) -> int:
    """Every expert's base blocks' share of `_transformer_weights` (what `offload=layers` keeps in host memory;
    the extensions' parameters stay on the device)."""
    spec = work.transformer
    block, kernels = block_parameters(spec)  # one block: all its parameters, its matmul kernels
    kernel_bytes, rest = _stored_bytes(work)
    size = int(kernels * kernel_bytes) + (block - kernels) * rest
    return work.num_experts * spec.num_layers * size // work.weight_shards


def _kv_cache(work: Workload) -> int:
    spec = work.transformer
    keys = work.text_tokens + work.image_tokens
    layers = spec.num_layers + sum(cost.extra_blocks for cost in _extension_costs(spec))
    size = layers * 2 * work.rows * keys * spec.inner_dim * DTYPE_BYTES[work.activations_dtype]
    return work.num_experts * size // (work.row_shards * work.weight_shards)


def _step_activations(work: Workload, platform: str) -> int:
    spec = work.transformer
    rows = math.ceil(work.rows / work.row_shards)
    tokens = math.ceil(work.tokens / work.token_shards)
    if platform == "gpu":  # fitted in bf16
        per_token = GPU_STEP_BYTES_PER_WIDTH * spec.inner_dim + GPU_STEP_BYTES_PER_FFN_WIDTH * spec.ffn_dim
        per_token *= DTYPE_BYTES[work.activations_dtype] / 2
    else:  # fitted in fp32 on CPU; a TPU's, unmeasured, scaled to its dtype
        per_token = STEP_BYTES_PER_WIDTH * spec.inner_dim + STEP_BYTES_PER_FFN_WIDTH * spec.ffn_dim
        per_token *= 1 if platform == "cpu" else DTYPE_BYTES[work.activations_dtype] / 4
    stream = rows * tokens * per_token
    heads, costs = spec.num_attention_heads, _extension_costs(spec)
    if work.attention in MATERIALISES_LOGITS:  # every query's logits over every key, at once
        queries, keys = tokens, work.tokens
    else:
        queries, keys = (min(block, n) for block, n in zip(work.attention_blocks, (tokens, work.tokens)))
    logits = LOGIT_COPIES * rows * heads * queries * keys * 4
    upcast = 0
    if platform == "cpu" and work.activations_dtype != "float32":
        _, kernels = transformer_parameters(spec)
        upcast = int(CPU_BF16_UPCAST * kernels / (spec.num_layers + sum(c.extra_blocks for c in costs)) * 4)
    # what the extensions hold while the base blocks run (a VACE model: all its hints [V, rows, tokens, D])
    held = sum(c.held_token_arrays for c in costs) * rows * tokens * spec.inner_dim
    held *= DTYPE_BYTES[work.activations_dtype]
    return int(stream) + logits + upcast + held


def step_cache_bytes(work: Workload) -> int:
    """The step cache's state (`work.step_cache`) in bytes, split over the mesh as the activations
    (rows over data and fsdp, tokens over context)."""
    held, spec = work.step_cache, work.transformer
    rows = math.ceil(work.rows / work.row_shards)
    tokens, time_tokens = (math.ceil(n / work.token_shards) for n in (work.tokens, work.time_tokens))
    size = held.token_arrays * rows * tokens * spec.inner_dim * DTYPE_BYTES[work.activations_dtype]
    size += held.time_token_widths * rows * time_tokens * spec.inner_dim * 4
    latent = work.tokens * math.prod(spec.patch_size) * spec.out_channels  # a video's latent values
    size += held.latent_arrays * work.videos * math.ceil(latent / work.token_shards) * 4
    return size


def _vae_decode(work: Workload, platform: str) -> int:
    assert work.vae is not None
    return vae_decode_bytes(
        work.vae, work.pixels, work.latent_frames, work.vae_decode_chunk, work.vae_tile,
        convolution=work.vae_convolution, dtype=work.vae_dtype, devices=work.devices, platform=platform,
    )  # fmt: skip


def advice(plan: MemoryPlan, work: Workload) -> list[str]:
    """Settings that lower the largest parts of a plan that does not fit, most effective first."""
    sizes = dict(plan.parts) | {"transformer weights": _transformer_share(plan)}
    options = []
    if not plan.fits_host:
        options.append("--set offload=none (every weight on the device), or a machine with more host memory")
    fitting, lowering = _offload_advice(plan, work)
    options += fitting
    if work.attention in MATERIALISES_LOGITS:
        options.append("--set attention=auto (a kernel that never holds the whole logit matrix)")
    if sizes.get("transformer weights", 0) > 0.3 * plan.peak and work.weights_dtype != "float8_e4m3fn":
        options.append("--set weights_dtype=float8_e4m3fn (the blocks' weights in half of bf16's memory)")
    if work.request_lora_cache is not None:
        options.append("LoRAs merged at load (--lora) instead of per request (request_loras=false, no --lora-dir): "
                       "no second copy of the weights")
    if "VAE decode activations" in sizes and not work.vae_tile:
        options.append("--set vae_tiling=true (decode in 256-pixel tiles)")
    if "VAE decode activations" in sizes and (work.vae_decode_chunk or 2) > 1:
        options.append("--set vae_decode_chunk=1")
    if work.activations_dtype == "float32":
        options.append("--dtype bfloat16 (half the activations and weights)")
    options += lowering
    options.append("a mesh over several devices (--set mesh_fsdp=N / mesh_context=N; README, 'Several devices')")
    options.append("a smaller --height/--width or fewer --num-frames")
    return options


OFFLOAD_EFFECTS = {
    "components": "each component's weights on the device only while it works: the text encoder, the idle expert "
    "and the VAE wait in host memory",
    "layers": "the blocks' weights in host memory, two blocks at a time on the device",
    "all": "components and layers together",
}


def _offload_advice(plan: MemoryPlan, work: Workload) -> tuple[list[str], list[str]]:
    """The stronger `offload` settings, each with its device peak and host bytes: those whose device
    peak fits, and else the one that lowers the peak most, where that is by a tenth or more."""
    if not plan.fits_host or plan.where == "cpu":
        return [], []
    fitting, lowest = [], None
    for choice in OFFLOAD_ORDER[OFFLOAD_ORDER.index(work.offload) + 1 :]:
        other = plan_memory(attrs.evolve(work, offload=choice), platform=plan.where, available=plan.available)
        option = (
            f"--set offload={choice} ({OFFLOAD_EFFECTS[choice]}; device peak {other.peak / GIB:.1f} GiB, "
            f"{other.host / GIB:.1f} GiB of host memory)"
        )
        if other.fits:
            fitting.append(option)
        elif other.peak <= 0.9 * plan.peak and (lowest is None or other.peak < lowest[0]):
            lowest = (other.peak, option)
    return fitting, [] if fitting or lowest is None else [lowest[1]]


def _transformer_share(plan: MemoryPlan) -> int:
    return sum(size for name, size in plan.parts if name.startswith("transformer weights"))


def check_fits(plan: MemoryPlan, work: Workload) -> None:
    """Raises InvalidRequestError with the plan and what would make it fit, where it does not."""
    if plan.fits:
        return
    options = "\n".join(f"  - {option}" for option in advice(plan, work))
    if plan.fits_host:
        assert plan.available is not None
        needs = f"{plan.peak / GIB:.1f} GiB and {plan.where} has {plan.available / GIB:.1f} GiB free"
    else:
        assert plan.host_available is not None
        needs = f"{plan.host / GIB:.1f} GiB of host memory and the host has {plan.host_available / GIB:.1f} GiB free"
    raise InvalidRequestError(
        f"this request needs about {needs}; nothing was loaded.\n{plan.summary()}\nWhat would make it fit:\n{options}"
    )
