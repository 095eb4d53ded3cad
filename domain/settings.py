"""The engine's settings, one frozen section per component; each default is stated here once.

Users never see the sections: presets, `--set` and maxdiffusion's configs use flat keys
(`vae_dtype`, `mesh_fsdp`, ...), which domain/config.py routes into them. A field's flat key
is its `metadata["key"]`, else its own name; validation errors name the flat key. Builders take
their section; every `"auto"` (dtypes, attention, the VAE's convolution) is resolved once per
platform (`resolved`).
"""

from __future__ import annotations

from typing import Any

import attrs

from wanjax.domain.attention import ATTENTION_BACKENDS, resolve_attention
from wanjax.domain.errors import ConfigError
from wanjax.domain.lora import parse_lora_specs
from wanjax.domain.offload import OFFLOAD_SETTINGS, streams_blocks
from wanjax.domain.requests import frame_count, pixel_size
from wanjax.domain.scheduling import SIGMA_SCHEDULES, SOLVERS
from wanjax.domain.sharding import CONTEXT_PARALLEL, MeshShape, parse_rule_overrides

AUTO = "auto"
DTYPES = (AUTO, "float32", "bfloat16")
WEIGHTS_DTYPES = (*DTYPES, "float8_e4m3fn")
MATMUL_DTYPES = (AUTO, "float8_e4m3fn")
SCHEDULER_DTYPES = ("float32", "bfloat16")
VAE_CONVOLUTIONS = (AUTO, "3d", "frames")
TEXT_ENCODER_BACKENDS = ("torch", "jax")
MAX_TEXT_TOKENS = 512  # text_len of every Wan model: what their cross-attention was trained on
MAX_FPS = 1000  # the mp4's frame rate; the Wan models make 16 (2.1) or 24 (2.2 TI2V) a second


def flat_key(attribute: attrs.Attribute) -> str:
    """The user-facing key of a section field."""
    return attribute.metadata.get("key", attribute.name)


def _one_of(allowed: tuple[str, ...]):
    def check(_: Any, attribute: attrs.Attribute, value: str) -> None:
        if value not in allowed:
            raise ConfigError(f"{flat_key(attribute)}={value!r}: must be one of {', '.join(allowed)}")

    return check


def _positive(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if value < 1:
        raise ConfigError(f"{flat_key(attribute)}={value!r}: must be >= 1")


def _fps(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if not 1 <= value <= MAX_FPS:
        raise ConfigError(f"{flat_key(attribute)}={value!r}: must be from 1 to {MAX_FPS} frames a second")


def _optional_positive(_: Any, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{flat_key(attribute)}={value!r}: must be >= 1, or none")


def _text_tokens(_: Any, attribute: attrs.Attribute, value: int) -> None:
    if not 1 <= value <= MAX_TEXT_TOKENS:
        raise ConfigError(
            f"{flat_key(attribute)}={value!r}: must be from 1 to {MAX_TEXT_TOKENS} (the Wan models' text_len); "
            "longer prompts are cut to it"
        )


def _lora_specs(_: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    try:
        parse_lora_specs(value)
    except ConfigError as err:
        raise ConfigError(f"{flat_key(attribute)}: {err}") from None


def _axis_rules(_: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    parse_rule_overrides(value)


def _dtype(key: str, allowed: tuple[str, ...] = DTYPES) -> Any:
    return attrs.field(default=AUTO, validator=_one_of(allowed), metadata={"key": key})


@attrs.frozen(kw_only=True)
class ModelSettings:
    """What is loaded: the checkpoint, its engine dtype, and component files replacing its own."""

    location: str = attrs.field(default="demo", metadata={"key": "model"})
    """`demo`, a preset's repo id, a Hugging Face repo id or a checkpoint folder."""
    dtype: str = _dtype("dtype")
    """The engine dtype every component's `auto` dtype follows; auto: bfloat16 on accelerators,
    float32 on CPU."""
    transformer_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """Transformer weights read from here instead of the model folder: a .safetensors file, a
    shard index or a folder, in diffusers or original Wan / ComfyUI naming."""
    transformer_2_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """The same for Wan 2.2 A14B's low-noise expert."""
    vae_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """VAE weights read from here instead of the model's: a .pth or .safetensors in the original
    Wan naming (Wan2.1_VAE.pth, ComfyUI's wan_2.1_vae.safetensors) or diffusers'."""
    text_encoder_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """UMT5 encoder weights read from here instead of the model's: one .pth or .safetensors in the
    official Wan naming (models_t5_umt5-xxl-enc-bf16.pth) or transformers'."""
    image_encoder_file: str | None = attrs.field(default=None, metadata={"parse": str})
    """CLIP image encoder weights (Wan 2.1 I2V) read from here: Wan's open-clip .pth, or a
    .safetensors in its or transformers' naming."""


@attrs.frozen(kw_only=True)
class DenoiserSettings:
    """The transformer experts and the denoising loop around them (docs/performance.md,
    "Denoising speed"); none of the speed options changes the model."""

    attention: str = attrs.field(default=AUTO, validator=_one_of(ATTENTION_BACKENDS))
    """The attention kernel; auto: blockwise on CPU, cuDNN on GPU, Pallas on TPU (domain/attention.py);
    blockwise_sage: blockwise with q k^T in int8 and p v in fp8 (adapters/jax/attention/sage.py);
    pallas_sage: the same arithmetic in our Pallas kernel."""
    scan_layers: bool = True
    activations_dtype: str = _dtype("activations_dtype")
    """The transformer's compute dtype: auto (= dtype), float32 or bfloat16."""
    weights_dtype: str = _dtype("weights_dtype", WEIGHTS_DTYPES)
    """Storage of the transformer weights: auto (= dtype), float32, bfloat16, or float8_e4m3fn
    (the blocks' matmul kernels in fp8, everything else in `dtype`; computed in activations_dtype)."""
    matmul_dtype: str = attrs.field(default=AUTO, validator=_one_of(MATMUL_DTYPES))
    """What the blocks' linear layers multiply in: auto (activations_dtype), or float8_e4m3fn (both
    operands scaled into e4m3, per token and per output channel, fp32 accumulation: fp8 GEMMs on
    Hopper GPUs; adapters/jax/platform/scaled_matmul.py). Works with any weights_dtype."""
    scheduler_dtype: str = attrs.field(default="float32", validator=_one_of(SCHEDULER_DTYPES))
    """The solver state between steps and its arithmetic: float32 (as diffusers) or bfloat16."""
    use_kv_cache: bool = True
    """Cross-attention K/V of the text (and I2V image) computed once per generation, not every step."""
    scan_diffusion_loop: bool = False
    """All denoising steps as one jax.lax.scan (no per-step progress; a new step count recompiles)."""
    offload: str = attrs.field(default="none", validator=_one_of(OFFLOAD_SETTINGS))
    """Where the weights wait: none (on the device), components (each component's weights on the
    device only while it works: the JAX text encoder, each expert, the VAE), layers (the blocks'
    weights in host memory, each block's copied to the device as the one before it runs; needs
    scan_layers), all (components and layers), auto (the least offload the memory plan says
    fits; domain/offload.py, docs/performance.md "Offload")."""
    loras: tuple[str, ...] = attrs.field(default=(), validator=_lora_specs, metadata={"item": str})
    """LoRAs merged into the transformer (the high-noise expert on Wan 2.2 A14B): PATH[:SCALE] each."""
    loras_low: tuple[str, ...] = attrs.field(default=(), validator=_lora_specs, metadata={"item": str})
    """LoRAs merged into the low-noise expert `transformer_2` of Wan 2.2 A14B models."""
    request_loras: bool = False
    """Requests may carry their own LoRAs (`wanjax serve --lora-dir` sets it): merged on the device
    per run into a copy of the weights they change, kept beside the base weights."""
    lora_cache_mb: int = attrs.field(default=1024, validator=_positive)
    """With request_loras: the device memory (MiB) that request LoRAs' factors are cached in."""

    def __attrs_post_init__(self) -> None:
        if streams_blocks(self.offload) and not self.scan_layers:
            raise ConfigError(f"offload={self.offload} streams the scanned block stack: set scan_layers=true, "
                              "or offload=none or components")  # fmt: skip
        if self.offload not in ("none", AUTO) and self.request_loras:
            raise ConfigError(f"request_loras merges into a copy of the weights on the device, which offload="
                              f"{self.offload} keeps in host memory: set offload=none, or merge the LoRAs at load "
                              "(--lora)")  # fmt: skip

    @property
    def is_fp8(self) -> bool:
        return self.weights_dtype == "float8_e4m3fn"


@attrs.frozen(kw_only=True)
class TextEncoderSettings:
    """The UMT5 prompt encoder."""

    dtype: str = _dtype("text_encoder_dtype")
    """The UMT5 encoder's dtype: auto (= dtype), float32 or bfloat16 (as Wan's own code runs it)."""
    max_sequence_length: int = attrs.field(default=MAX_TEXT_TOKENS, validator=_text_tokens)
    batched: bool = attrs.field(default=True, metadata={"key": "use_batched_text_encoder"})
    """Prompts and negative prompts encoded in one text-encoder call (false: one call each)."""
    compile: bool = attrs.field(default=False, metadata={"key": "compile_text_encoder"})
    """torch.compile the text encoder (pays a compile on the first prompt batch of each size)."""
    backend: str = attrs.field(
        default="torch", validator=_one_of(TEXT_ENCODER_BACKENDS), metadata={"key": "text_encoder_backend"}
    )
    """torch (transformers' UMT5 on the host CPU) or jax (ours, on the device with the rest of the run,
    its weights held there; no torch import)."""
    embeddings_cache_dir: str = attrs.field(default=AUTO, metadata={"key": "text_embeddings_cache_dir"})
    """Prompt embeddings kept on disk, so a run repeating its prompts skips the text encoder: auto
    is $WANJAX_CACHE/text (else ~/.cache/wanjax/text); empty or none turns it off."""

    def __attrs_post_init__(self) -> None:
        if self.compile and self.backend == "jax":
            raise ConfigError(
                "compile_text_encoder=true applies to the torch text encoder; the jax one is always "
                "compiled by XLA: drop compile_text_encoder, or use text_encoder_backend=torch"
            )


@attrs.frozen(kw_only=True)
class VaeSettings:
    """The VAE at scale (docs/performance.md, "VAE decode")."""

    dtype: str = _dtype("vae_dtype")
    """The VAE's compute dtype: auto (= dtype), float32 or bfloat16."""
    weights_dtype: str = _dtype("vae_weights_dtype")
    """Storage of the VAE weights: auto (= vae_dtype), float32 or bfloat16."""
    decode_chunk: int | None = attrs.field(
        default=1, validator=_optional_positive, metadata={"key": "vae_decode_chunk", "parse": int}
    )
    """Latent frames per step of the decode scan (memory flat in frame count); none = unrolled per frame."""
    encode_chunk: int | None = attrs.field(
        default=4, validator=_optional_positive, metadata={"key": "vae_encode_chunk", "parse": int}
    )
    """Pixel frames (a multiple of 4) per step of the encode scan (memory flat in frame count); none =
    unrolled, whose memory grows with the frames (XLA:CPU: 15 GiB at 832x480x9, 23 GiB at x17)."""
    convolution: str = attrs.field(
        default=AUTO, validator=_one_of(VAE_CONVOLUTIONS), metadata={"key": "vae_convolution"}
    )
    """How the 3x3x3 convolutions run: auto (frames on CPU, else 3d), 3d (one 3-D convolution), or
    frames (per time tap of the kernel, a 2-D convolution of every frame, summed: XLA:CPU's 2-D
    convolutions are 1.25-4x faster than its 3-D ones; the upsamples' convolutions then run on
    their input by output phase, docs/performance.md)."""
    tiling: bool = attrs.field(default=False, metadata={"key": "vae_tiling"})
    """Spatial tiling of VAE decode and encode with overlap blending, for sizes that do not fit memory."""
    tile_size: int = attrs.field(default=256, validator=_positive, metadata={"key": "vae_tile_size"})
    """Tile edge in output pixels (diffusers' tile_sample_min_height/width)."""
    tile_stride: int = attrs.field(default=192, validator=_positive, metadata={"key": "vae_tile_stride"})
    """Tile stride in output pixels; tiles overlap by size - stride, blended linearly."""

    @property
    def tile(self) -> int | None:
        """The tile edge when tiling is on, else None."""
        return self.tile_size if self.tiling else None


@attrs.frozen(kw_only=True)
class MeshSettings:
    """How a run spreads over devices (docs/performance.md, "Sharding"); all four sizes 1: one device."""

    data: int = attrs.field(default=1, validator=_positive, metadata={"key": "mesh_data"})
    """Devices splitting the rows: videos and CFG's conditional/unconditional halves."""
    fsdp: int = attrs.field(default=1, validator=_positive, metadata={"key": "mesh_fsdp"})
    """Devices splitting the rows and each weight's model-width dimension (gathered per layer)."""
    tensor: int = attrs.field(default=1, validator=_positive, metadata={"key": "mesh_tensor"})
    """Devices splitting the attention heads and MLP columns (tensor parallelism)."""
    context: int = attrs.field(default=1, validator=_positive, metadata={"key": "mesh_context"})
    """Devices splitting the video tokens (context-parallel attention)."""
    context_parallel: str = attrs.field(default="ulysses", validator=_one_of(CONTEXT_PARALLEL))
    """Self-attention over the context axis: ulysses (all-to-all) or ring (K/V blocks passed around)."""
    logical_axis_rules: tuple[str, ...] = attrs.field(default=(), validator=_axis_rules, metadata={"item": str})
    """Overrides of the default logical axis rules, LOGICAL=AXIS[+AXIS] each (LOGICAL= replicates)."""

    @property
    def shape(self) -> MeshShape:
        return MeshShape(data=self.data, fsdp=self.fsdp, tensor=self.tensor, context=self.context)


@attrs.frozen(kw_only=True)
class StartupSettings:
    """What makes the second start fast (docs/performance.md, "Start-up")."""

    weights_cache: bool = False
    """Save the converted transformer weights once (orbax) and restore them on later starts."""
    weights_cache_dir: str = AUTO
    """Where: auto is $WANJAX_CACHE/weights (else ~/.cache/wanjax/weights)."""
    compilation_cache_dir: str = AUTO
    """JAX's persistent compilation cache (set at CLI start): auto is $WANJAX_CACHE/xla (else
    ~/.cache/wanjax/xla); empty or none turns it off."""
    warmup: bool = False
    """Before the timed run, a 2-step run that compiles everything; its output is never written."""


@attrs.frozen(kw_only=True)
class SamplingDefaults:
    """Each request's defaults; the request (domain/requests.py) validates the values it gets (the
    size and frame count are also checked here, before input media are read at them). The modes'
    options have a section of their own (domain/modes/options.py)."""

    height: int = attrs.field(default=480, validator=pixel_size)
    width: int = attrs.field(default=832, validator=pixel_size)
    num_frames: int = attrs.field(default=81, validator=frame_count)
    """Checked here as well as in each request: input media are read at this size before any request."""
    num_inference_steps: int = 50
    guidance_scale: float = 5.0
    guidance_scale_low: float | None = attrs.field(default=None, metadata={"parse": float})
    boundary_ratio: float | None = attrs.field(default=None, metadata={"parse": float})
    flow_shift: float = 3.0
    sample_solver: str = attrs.field(default="unipc", validator=_one_of(SOLVERS))
    """unipc (UniPC-2, Wan's default), dpm++ (the Wan code's DPM-Solver++) or euler (flow-match Euler)."""
    sigma_schedule: str = attrs.field(default="official", validator=_one_of(SIGMA_SCHEDULES))
    """The UniPC noise grid: official (the Wan code's) or diffusers (diffusers >= 0.37's), docs/sampling.md."""
    sample_timesteps: tuple[float, ...] | None = attrs.field(default=None, metadata={"parse": tuple, "item": float})
    expert_switch_step: int | None = attrs.field(default=None, metadata={"parse": int})
    negative_prompt: str = ""
    seed: int = 0
    fps: int = attrs.field(default=16, validator=_fps)


def platform_dtype(platform: str) -> str:
    """What `dtype=auto` means on `platform` ("cpu", "gpu", "tpu"): bfloat16 on accelerators."""
    return "float32" if platform == "cpu" else "bfloat16"


def _or(value: str, fallback: str) -> str:
    return fallback if value == AUTO else value


def resolved_model(model: ModelSettings, platform: str) -> ModelSettings:
    return attrs.evolve(model, dtype=_or(model.dtype, platform_dtype(platform)))


def resolved_denoiser(denoiser: DenoiserSettings, dtype: str, platform: str) -> DenoiserSettings:
    """`auto` attention for `platform`; `auto` dtypes follow the engine `dtype` (fp8 weights keep
    their name: the builder stores only the blocks' kernels in fp8)."""
    return attrs.evolve(
        denoiser,
        attention=resolve_attention(denoiser.attention, platform),
        activations_dtype=_or(denoiser.activations_dtype, dtype),
        weights_dtype=_or(denoiser.weights_dtype, dtype),
    )


def resolved_text_encoder(text_encoder: TextEncoderSettings, dtype: str) -> TextEncoderSettings:
    return attrs.evolve(text_encoder, dtype=_or(text_encoder.dtype, dtype))


def platform_vae_convolution(platform: str) -> str:
    """What `vae_convolution=auto` means on `platform`: per-frame 2-D convolutions on CPU."""
    return "frames" if platform == "cpu" else "3d"


def resolved_vae(vae: VaeSettings, dtype: str, platform: str) -> VaeSettings:
    compute = _or(vae.dtype, dtype)
    return attrs.evolve(
        vae,
        dtype=compute,
        weights_dtype=_or(vae.weights_dtype, compute),
        convolution=_or(vae.convolution, platform_vae_convolution(platform)),
    )
