"""The memory plan: what a generation holds at its peak, estimated before anything loads.

A request that cannot fit is refused with the estimate and the settings that would make it
fit, instead of loading for minutes and dying in an allocator. Every term is arithmetic on
the specs, the request's geometry and the config; parameter counts come from the
checkpoint's headers (or the architecture, for `wanjax bench`).

Resident through the run: the transformer weights (every expert), with per-request LoRAs a
merged copy of them (at most all of them) and the LoRA factor cache, the VAE weights, the
text encoder where it shares the device's memory (CPU), the cross-attention KV cache and a
runtime baseline. On top of them, the largest phase's transient: one denoising step's
activations, the VAE decode's, or the VAE encode's (where the request encodes a video or an
image first). With `offload=components` a component's weights belong to the phase it works
in (the text encoder's to the text encoding, one expert and the KV cache to the denoising, the
VAE's to its encode and decode), so the peak is the largest phase, not the sum; the host then
holds every component's weights, listed apart (domain/offload.py).

The activation coefficients are XLA's own buffer assignment on CPU, fitted over the 1.3B,
5B and 14B architectures at 4680 and 9360 tokens (`compiled.memory_analysis()`, fp32,
scanned layers, blockwise attention; each term within 8% of it): per token and row, 38
bytes per unit of model width and 3.3 per unit of FFN width; plus the attention's live
logits. The CPU baseline is fitted to the peak resident memory of demo-model runs
(tests/integration/test_memory_plan.py).

The VAE's transients are counted in its caches: each causal 3-frame convolution carries its
input's last two frames from one temporal chunk to the next, all of them held together (3.5
GiB at 832x480 for the Wan 2.1 decoder), and a chunk's activations are in proportion to the
same widths. Their multiples are XLA's buffer assignment of the published Wan 2.1 and 2.2 VAEs
at 832x480 and 1280x704 (tests/unit/test_vae_memory_plan.py), compiled as wanjax compiles them
(XLA's own convolutions on CPU), times the resident memory XLA:CPU holds over its assignment.
"""

from __future__ import annotations

import math

import attrs

from wanjax.domain.modes.animate.parameters import animate_parameters
from wanjax.domain.attention import MATERIALISES_LOGITS
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.offload import OFFLOAD_ORDER, moves_components, streams_blocks
from wanjax.domain.specs import TransformerSpec, VaeSpec

GIB = 2**30
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1}
STEP_BYTES_PER_WIDTH = 38.0  # per token, row and unit of inner_dim
STEP_BYTES_PER_FFN_WIDTH = 3.3  # per token, row and unit of ffn_dim
LOGIT_COPIES = 3  # logits, their exponentials and the probabilities cast for PV
CPU_BF16_UPCAST = 1.6  # XLA's CPU dots run bf16 in fp32: fp32 copies of ~1.6 layers' weights
VAE_CONTEXT_FRAMES = 2  # frames of its input a causal 3-frame convolution carries to the next chunk
# The decode's transient in multiples of its caches, held + per_frame x chunk (latent frames), by
# convolution form: XLA:CPU's buffer assignment of both published VAEs, chunks 1 and 2, within 15% of
# each (the per-frame form holds each tap's products of a chunk: more per frame than `3d`)
VAE_DECODE_CACHE_MULTIPLES = {"frames": (1.2, 1.3), "3d": (1.3, 0.8)}
VAE_ENCODE_CACHE_MULTIPLE = 4.15  # the same for the encode, per 4 pixel frames of a scanned chunk
VAE_ENCODE_UNROLLED_MULTIPLES = (1.05, 2.0)  # unrolled: held + per chunk of 4 pixel frames
# Resident over XLA's assignment on CPU (XLA's own convolutions keep their work inside it; YNNPACK's
# held 1.33-1.37x): 1.00-1.01 for the untiled decodes and encodes of both VAEs at 832x480x9, 1280x720x9
# and 1280x704x9; 1.04-1.05 for the tiled decodes and the Wan 2.1 decode at 416x240x9
VAE_DECODE_RESIDENT = 1.02
# A tiled decode's transient over the untiled plan of one tile, by convolution form, plus every tile's
# decoded output held for blending, about twice the video (diffusers' tiles overlap by a quarter each
# way): XLA:CPU's buffer assignment of both published VAEs at 832x480 and 1280x704, within 15% of each
# (the per-frame form's 1.36 fell to 1.04 once it skipped the first chunk's zero context; 1.08 of its
# larger untiled multiples with XLA's own convolutions, the Wan 2.1 and 2.2 decodes' resident growth
# at +9% and -13% of the plan, as their assignments at +14% and -5%)
VAE_TILED_MULTIPLES = {"frames": 1.08, "3d": 0.94}
VAE_TILE_OUTPUTS = 2.0
# Off CPU the device holds what XLA assigns (no CPU library's working memory beside it), but that is
# not the CPU-fitted assignment in the compute dtype: an H200 (JAX 0.11.2, bfloat16, `3d`) held
# these multiples of it (the plan without VAE_DECODE_RESIDENT), by VAE (Wan 2.2's residual layout or
# not), pass and tiling, at 832x480x81, 1280x720x81 and 1280x704x121 (docs/performance.md, "The VAE
# at real sizes"). The tiled encodes were not measured there: they take the untiled multiples.
VAE_ACCELERATOR_MULTIPLES = {  # (is_residual, pass, tiled)
    (False, "decode", False): 1.17, (False, "decode", True): 1.32,
    (True, "decode", False): 1.52, (True, "decode", True): 1.99,
    (False, "encode", False): 0.73, (False, "encode", True): 0.73,
    (True, "encode", False): 1.12, (True, "encode", True): 1.12,
}
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
    runs (`wanjax bench` without --vae); pixels: height x width of the video; vae_convolution:
    the VAE's convolution form as resolved (`frames` or `3d`); vae_encode_frames: the video frames the VAE encodes first (0: none, text-to-video).
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
    text_encoder_parameters: int = 0
    text_encoder_dtype: str = "float32"
    text_encoder_backend: str = "torch"
    weight_shards: int = 1
    request_lora_cache: int | None = None
    row_shards: int = 1
    token_shards: int = 1
    devices: int = 1
    offload: str = "none"  # where the weights wait between their uses (domain/offload.py)


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
    """(all parameters, those of the matmul kernels fp8 storage stores: the blocks', and an Animate
    model's face adapters') of one expert, as diffusers counts them."""
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
    block_kernels += spec.face_adapter_count * 4 * d * d  # Animate's face adapters: q, k, v, out (fp8 too)
    return total + animate_parameters(spec), block_kernels


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
        movable_text = [("text encoder weights", work.text_encoder_parameters * DTYPE_BYTES[work.text_encoder_dtype])]
    elif platform == "cpu" and work.text_encoder_parameters:
        text = [
            ("text encoder weights", work.text_encoder_parameters * DTYPE_BYTES[work.text_encoder_dtype]),
            ("text encoder runtime (torch)", TEXT_ENCODER_RUNTIME),  # unless the prompts are cached
        ]
    if moves_components(work.offload):
        resident, own = text, {"text": movable_text, "denoising": transformer, "VAE": vae}
        host += vae + movable_text
    else:
        resident, own = transformer + vae + movable_text + text, {"text": [], "denoising": [], "VAE": []}
    phases = {"text encoding": own["text"]} if own["text"] else {}
    phases["denoising"] = own["denoising"] + [("denoising step activations", _step_activations(work, platform))]
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
        parts.append(("request LoRAs: merged copy, factor cache", weights + work.request_lora_cache))
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
            per_run += work.text_encoder_parameters * DTYPE_BYTES[work.text_encoder_dtype]
    return per_step, per_run


def _transformer_weights(work: Workload) -> int:
    total, kernels = transformer_parameters(work.transformer)
    if work.weights_dtype == "float8_e4m3fn":  # the blocks' kernels in fp8, the rest in the compute dtype
        size = kernels + (total - kernels) * DTYPE_BYTES[work.activations_dtype]
    else:
        size = total * DTYPE_BYTES[work.weights_dtype]
    return work.num_experts * size // work.weight_shards


def block_weights(work: Workload) -> int:
    """Every expert's base blocks' share of `_transformer_weights` (what `offload=layers` keeps in host memory;
    a VACE model's VACE blocks and an Animate model's additions stay on the device)."""
    spec = work.transformer
    base = attrs.evolve(spec, vace_layers=None, vace_in_channels=None, animate=None)
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


def _vae_decode(work: Workload, platform: str) -> int:
    assert work.vae is not None
    return vae_decode_bytes(
        work.vae, work.pixels, work.latent_frames, work.vae_decode_chunk, work.vae_tile,
        convolution=work.vae_convolution, dtype=work.vae_dtype, devices=work.devices, platform=platform,
    )  # fmt: skip


def vae_decode_bytes(
    vae: VaeSpec, pixels: int, latent_frames: int, chunk: int | None, tile: int | None,
    *, convolution: str = "frames", dtype: str = "float32", devices: int = 1, platform: str = "cpu",
) -> int:  # fmt: skip
    """The decode's transient on `platform` (on CPU, resident): the caches every causal convolution
    carries from one chunk to the next, and a chunk's activations, both in proportion to the caches
    (a tile's with tiling; None for `chunk` unrolls every latent frame into one program, which holds
    them all). Tiled (`tile` pixels a side, smaller than the video), by the `convolution` form, plus
    the tiles' outputs."""
    tiled = bool(tile) and pixels > tile**2
    chunk = latent_frames if chunk is None else min(chunk, latent_frames)
    channels = vae_decoder_cache_channels_per_pixel(vae)
    caches = VAE_CONTEXT_FRAMES * channels * (tile**2 if tiled else pixels) * DTYPE_BYTES[dtype] / devices
    held, per_frame = VAE_DECODE_CACHE_MULTIPLES[convolution]
    transient = (held + per_frame * chunk) * caches
    if tiled:
        frames = 1 + vae.temporal_compression * (latent_frames - 1)
        outputs = VAE_TILE_OUTPUTS * vae.out_channels // vae.patch**2 * pixels * frames * DTYPE_BYTES[dtype]
        transient = VAE_TILED_MULTIPLES[convolution] * transient + outputs
    return int(_held_over_assigned(vae, "decode", tiled, platform) * transient)


def _held_over_assigned(vae: VaeSpec, mode: str, tiled: bool, platform: str) -> float:
    """What `platform` holds over the VAE's CPU-fitted buffer assignment."""
    return VAE_DECODE_RESIDENT if platform == "cpu" else VAE_ACCELERATOR_MULTIPLES[vae.is_residual, mode, tiled]


def vae_decoder_cache_channels_per_pixel(vae: VaeSpec) -> float:
    """Channels per output pixel of the inputs the decoder's causal 3-frame convolutions cache (each
    carries its input's last 2 frames): conv_in and the middle block's four at the latents'
    resolution, each level's residual blocks (two each) and temporal upsample, conv_out at the top.
    Level l (0 the coarsest) runs on 4**(l + 1 - levels) of the (patch) pixels. The Wan 2.1 VAE:
    1182, mostly the top level's seven 96-channel convolutions; the Wan 2.2 VAE: 892."""
    dims = [vae.decoder_dim * m for m in (vae.dim_mult[-1], *vae.dim_mult[::-1])]
    levels = len(vae.dim_mult)
    temporal = (*vae.temperal_downsample[::-1], False)
    total = (vae.z_dim + 4 * dims[0]) / 4 ** (levels - 1)
    for level, (i, o) in enumerate(zip(dims[:-1], dims[1:])):
        i = i // 2 if level > 0 and not vae.is_residual else i  # Wan 2.1: the upsample halved it
        cached = i + o + 2 * o * vae.num_res_blocks + o * temporal[level]
        total += cached / 4 ** (levels - 1 - level)
    return (total + dims[-1]) / vae.patch**2


def vae_encode_bytes(
    vae: VaeSpec, pixels: int, frames: int, chunk: int | None, tile: int | None,
    *, dtype: str = "float32", platform: str = "cpu",
) -> int:  # fmt: skip
    """The encode's transient on `platform` (on CPU, resident), in proportion to the encoder's caches:
    per 4 pixel frames of a scanned chunk, or (`chunk` None) held plus per chunk of 4 frames unrolled
    into one program. A tile's side counts patchified pixels (as diffusers cuts them): `patch` times
    as many pixels."""
    tile_pixels = (tile * vae.patch) ** 2 if tile else pixels
    tiled = pixels > tile_pixels
    pixels = min(pixels, tile_pixels)
    caches = VAE_CONTEXT_FRAMES * vae_encoder_cache_channels_per_pixel(vae) * pixels * DTYPE_BYTES[dtype]
    if chunk is None:
        held, per_chunk = VAE_ENCODE_UNROLLED_MULTIPLES
        multiple = held + per_chunk * math.ceil((frames - 1) / 4)
    else:
        multiple = VAE_ENCODE_CACHE_MULTIPLE * max(chunk // 4, 1)
    return int(_held_over_assigned(vae, "encode", tiled, platform) * multiple * caches)


def vae_encoder_cache_channels_per_pixel(vae: VaeSpec) -> float:
    """As `vae_decoder_cache_channels_per_pixel`, for the encoder: conv_in on the (patch) pixels, each
    level's residual blocks and the temporal downsample's one frame (half of two) at the level
    below, the middle block's four and conv_out at the latents' resolution. The Wan 2.1 VAE: 702."""
    dims = [vae.base_dim * m for m in (1, *vae.dim_mult)]
    levels = len(vae.dim_mult)
    total = vae.in_channels
    for level, (i, o) in enumerate(zip(dims[:-1], dims[1:])):
        total += (i + o + 2 * o * (vae.num_res_blocks - 1)) / 4**level
        if level < levels - 1 and vae.temperal_downsample[level]:
            total += o / 2 / 4 ** (level + 1)
    return (total + 5 * dims[-1] / 4 ** (levels - 1)) / vae.patch**2


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
