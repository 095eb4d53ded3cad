"""The memory plan: what a generation holds at its peak, estimated before anything loads.

A request that cannot fit is refused with the estimate and the settings that would make it
fit, instead of loading for minutes and dying in an allocator. Every term is arithmetic on
the specs, the request's geometry and the config; parameter counts come from the
checkpoint's headers (or the architecture, for `wanjax bench`).

Resident through the run: the transformer weights (every expert), with per-request LoRAs a
merged copy of them (at most all of them) and the LoRA factor cache, the VAE weights, the
text encoder where it shares the device's memory (CPU), the cross-attention KV cache and a
runtime baseline. On top of them, the larger of two transients: one denoising step's
activations, or the VAE decode's.

The activation coefficients are XLA's own buffer assignment on CPU, fitted over the 1.3B,
5B and 14B architectures at 4680 and 9360 tokens (`compiled.memory_analysis()`, fp32,
scanned layers, blockwise attention; each term within 8% of it): per token and row, 38
bytes per unit of model width and 3.3 per unit of FFN width; plus the attention's live
logits. XLA's buffer assignment is an upper bound on what a run touches: the VAE decode's
coefficient (60 bytes per decoder channel and output pixel of a chunk, flat in frame count)
and the CPU baseline are fitted to the peak resident memory of demo-model runs
(tests/integration/test_memory_plan.py), where the buffer assignment says about twice as
much (Wan 2.1 VAE at 832x480: 4.2 GiB planned, 6.9 GiB assigned).
"""

from __future__ import annotations

import math

import attrs

from wanjax.domain.attention import MATERIALISES_LOGITS
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.specs import TransformerSpec, VaeSpec

GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}
STEP_BYTES_PER_WIDTH = 38.0  # per token, row and unit of inner_dim
STEP_BYTES_PER_FFN_WIDTH = 3.3  # per token, row and unit of ffn_dim
LOGIT_COPIES = 3  # logits, their exponentials and the probabilities cast for PV
CPU_BF16_UPCAST = 1.6  # XLA's CPU dots run bf16 in fp32: fp32 copies of ~1.6 layers' weights
VAE_DECODE_BYTES_PER_CHANNEL_PIXEL = 60  # fp32, one latent frame (4 video frames) per chunk
# torch, transformers and the encoder's runtime in the process, where the text encoder shares the
# device's memory (CPU): demo runs with the encoder loaded peak 0.47 GiB above those without.
TEXT_ENCODER_RUNTIME = 480 * 2**20
RUNTIME_BASELINE = {"cpu": 370 * 2**20, "gpu": 1 * GIB, "tpu": 1 * GIB}  # interpreter, libraries, XLA


@attrs.frozen(kw_only=True)
class Workload:
    """What one generation runs, in the terms the plan needs.

    rows: transformer batch (videos x 2 under guidance); tokens: video tokens per row;
    text_tokens / image_tokens: cross-attention keys; attention: the resolved backend and its
    (block_q, block_k); weight_shards / row_shards / token_shards: how a mesh divides the
    weights (fsdp x tensor), rows (data x fsdp) and tokens (context), and devices its size
    (the VAE decode splits frames spatially over all of them); request_lora_cache: with
    per-request LoRAs, their factor cache's bytes (else None); vae: None when no VAE
    runs (`wanjax bench` without --vae); pixels: height x width of the video.
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
    text_encoder_parameters: int = 0
    text_encoder_dtype: str = "float32"
    text_encoder_backend: str = "torch"
    weight_shards: int = 1
    request_lora_cache: int | None = None
    row_shards: int = 1
    token_shards: int = 1
    devices: int = 1
    offload: str = "none"  # "layers": the blocks' weights in host memory, two on the device (domain/offload.py)


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
        lines = [f"memory plan ({self.where}, offload={self.offload}):"]
        lines += [f"  {name:<34} {size / GIB:8.2f} GiB" for name, size in self.parts]
        lines.append(f"  {'estimated peak':<34} {self.peak / GIB:8.2f} GiB")
        if self.available is not None:
            lines.append(f"  {'available':<34} {self.available / GIB:8.2f} GiB")
        if self.host_parts:
            lines.append("host memory:")
            lines += [f"  {name:<34} {size / GIB:8.2f} GiB" for name, size in self.host_parts]
            if self.host_available is not None:
                lines.append(f"  {'available':<34} {self.host_available / GIB:8.2f} GiB")
        return "\n".join(lines)


def transformer_parameters(spec: TransformerSpec) -> tuple[int, int]:
    """(all parameters, those of the blocks' matmul kernels) of one expert, as diffusers counts them."""
    d, f = spec.inner_dim, spec.ffn_dim
    p = math.prod(spec.patch_size)
    linear = lambda n_in, n_out: n_in * n_out + n_out
    embed = linear(p * spec.in_channels, d) + linear(spec.freq_dim, d) + linear(d, d) + linear(d, 6 * d)
    embed += linear(spec.text_dim, d) + linear(d, d)
    image_kv = spec.image_dim is not None
    if image_kv:
        m = spec.image_dim
        embed += 2 * m + linear(m, m) + linear(m, d) + 2 * d + (spec.pos_embed_seq_len or 0) * m
    kernels = (8 + 2 * image_kv) * d * d + 2 * d * f
    block = kernels + (8 + 2 * image_kv) * d + 4 * d + image_kv * d + 2 * d * spec.cross_attn_norm + f + d + 6 * d
    head = linear(d, p * spec.out_channels) + 2 * d
    total, block_kernels = embed + spec.num_layers * block + head, spec.num_layers * kernels
    if spec.is_vace:  # patch embedding and proj_in, then VACE blocks: a base block and proj_out each
        hints = len(spec.vace_layers)
        total += linear(p * spec.vace_in_channels, d) + linear(d, d) + hints * (block + linear(d, d))
        block_kernels += hints * (kernels + d * d)
    return total, block_kernels


def plan_memory(
    work: Workload, *, platform: str, available: int | None, host_available: int | None = None
) -> MemoryPlan:
    """The estimated peak of `work` on `platform` ("cpu", "gpu", "tpu"), parts named; with
    `offload=layers` the blocks' weights counted in host memory, two blocks on the device."""
    weights, blocks = _transformer_weights(work), block_weights(work)
    host_parts = ()
    if work.offload == "layers":
        per_block = blocks // (work.num_experts * work.transformer.num_layers)
        parts = [("transformer weights, 2 blocks", weights - blocks + 2 * per_block)]
        host_parts = (("transformer blocks' weights", blocks),)
    else:
        parts = [("transformer weights", weights)]
    if work.request_lora_cache is not None:  # the copy bounded by every weight a LoRA could change
        parts.append(("request LoRAs: merged copy, factor cache", weights + work.request_lora_cache))
    if work.kv_cache:
        parts.append(("cross-attention KV cache", _kv_cache(work)))
    if work.vae is not None:
        parts.append(("VAE weights", work.vae_parameters * DTYPE_BYTES[work.vae_dtype]))
    on_device = work.text_encoder_backend == "jax"  # else torch holds it in host memory off CPU
    if work.text_encoder_parameters and (platform == "cpu" or on_device):
        parts.append(("text encoder weights", work.text_encoder_parameters * DTYPE_BYTES[work.text_encoder_dtype]))
        if not on_device:
            parts.append(("text encoder runtime (torch)", TEXT_ENCODER_RUNTIME))  # unless the prompts are cached
    step = _step_activations(work, platform)
    decode = _vae_decode(work) if work.vae is not None else 0
    parts.append(("denoising step activations", step) if step >= decode else ("VAE decode activations", decode))
    parts.append(("runtime baseline", RUNTIME_BASELINE.get(platform, GIB)))
    return MemoryPlan(tuple(parts), available, platform, host_parts, host_available, work.offload)


def _transformer_weights(work: Workload) -> int:
    total, kernels = transformer_parameters(work.transformer)
    if work.weights_dtype == "float8_e4m3fn":  # the blocks' kernels in fp8, the rest in the compute dtype
        size = kernels + (total - kernels) * DTYPE_BYTES[work.activations_dtype]
    else:
        size = total * DTYPE_BYTES[work.weights_dtype]
    return work.num_experts * size // work.weight_shards


def block_weights(work: Workload) -> int:
    """Every expert's base blocks' share of `_transformer_weights` (what `offload=layers` keeps in host memory;
    a VACE model's VACE blocks stay on the device)."""
    spec = work.transformer
    base = attrs.evolve(spec, vace_layers=None, vace_in_channels=None)
    one, two = (transformer_parameters(attrs.evolve(base, num_layers=n)) for n in (1, 2))
    block, kernels = two[0] - one[0], two[1] - one[1]  # one block: all its parameters, its matmul kernels
    fp8 = work.weights_dtype == "float8_e4m3fn"
    dtype = work.activations_dtype if fp8 else work.weights_dtype
    size = kernels * (1 if fp8 else DTYPE_BYTES[dtype]) + (block - kernels) * DTYPE_BYTES[dtype]
    return work.num_experts * spec.num_layers * size // work.weight_shards


def _kv_cache(work: Workload) -> int:
    spec = work.transformer
    keys = work.text_tokens + work.image_tokens
    layers = spec.num_layers + len(spec.vace_layers or ())
    size = layers * 2 * work.rows * keys * spec.inner_dim * DTYPE_BYTES[work.activations_dtype]
    return work.num_experts * size // (work.row_shards * work.weight_shards)


def _step_activations(work: Workload, platform: str) -> int:
    spec = work.transformer
    rows = math.ceil(work.rows / work.row_shards)
    tokens = math.ceil(work.tokens / work.token_shards)
    per_token = STEP_BYTES_PER_WIDTH * spec.inner_dim + STEP_BYTES_PER_FFN_WIDTH * spec.ffn_dim
    stream = rows * tokens * per_token
    if platform != "cpu":  # fitted in fp32; an H200 held 11.5 GiB of bf16 step activations where this says 34.3
        stream *= DTYPE_BYTES[work.activations_dtype] / 4
    heads, hints = spec.num_attention_heads, len(spec.vace_layers or ())
    if work.attention in MATERIALISES_LOGITS:  # every query's logits over every key, at once
        queries, keys = tokens, work.tokens
    else:
        queries, keys = (min(block, n) for block, n in zip(work.attention_blocks, (tokens, work.tokens)))
    logits = LOGIT_COPIES * rows * heads * queries * keys * 4
    upcast = 0
    if platform == "cpu" and work.activations_dtype != "float32":
        _, kernels = transformer_parameters(spec)
        upcast = int(CPU_BF16_UPCAST * kernels / (spec.num_layers + hints) * 4)
    # a VACE model holds all its hints [V, rows, tokens, D] while the base blocks run
    held_hints = hints * rows * tokens * spec.inner_dim * DTYPE_BYTES[work.activations_dtype]
    return int(stream) + logits + upcast + held_hints


def _vae_decode(work: Workload) -> int:
    """The decode's transient: a chunk's feature maps at every resolution (a tile's with tiling)."""
    assert work.vae is not None
    pixels = min(work.pixels, work.vae_tile**2) if work.vae_tile else work.pixels
    chunk = work.latent_frames if work.vae_decode_chunk is None else min(work.vae_decode_chunk, work.latent_frames)
    scale = DTYPE_BYTES[work.vae_dtype] / 4
    per_device = pixels * chunk * scale / work.devices
    return int(VAE_DECODE_BYTES_PER_CHANNEL_PIXEL * vae_decoder_channels_per_pixel(work.vae) * per_device)


def vae_decoder_channels_per_pixel(vae: VaeSpec) -> float:
    """The decoder's feature channels per output pixel, summed over its resolutions: level l (0 at
    the decoder's top) has decoder_dim * dim_mult[l] channels on 4**-l of the pixels, and the
    patch (Wan 2.2) folds patch**2 pixels into one. Wan 2.1's VAE: 96 + 48 + 24 + 6 = 174."""
    levels = sum(vae.decoder_dim * mult / 4**level for level, mult in enumerate(vae.dim_mult))
    return levels / vae.patch**2


def advice(plan: MemoryPlan, work: Workload) -> list[str]:
    """Settings that lower the largest parts of a plan that does not fit, most effective first."""
    sizes = dict(plan.parts)
    options = []
    if not plan.fits_host:
        options.append("--set offload=none (the blocks' weights on the device), or a machine with more host memory")
    if work.offload == "none" and sizes.get("transformer weights", 0) > 0.3 * plan.peak:
        options.append("--set offload=layers (the blocks' weights in host memory, two blocks at a time on the device)")
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
    options.append("a mesh over several devices (--set mesh_fsdp=N / mesh_context=N; README, 'Several devices')")
    options.append("a smaller --height/--width or fewer --num-frames")
    return options


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
