"""The functions the container composes: each takes its settings section and returns one adapter.

Each imports its backend inside, so building a container (or a JAX-only run) never imports
torch, and nothing heavy loads before it is asked for. The sections they get are resolved
(`GenerationConfig.resolved`): no `auto` dtype or attention is left to decide here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from wanjax.adapters.checkpoints.checkpoint import Checkpoint, ReplacedFiles
from wanjax.domain.errors import ConfigError
from wanjax.domain.lora import loras_per_expert
from wanjax.domain.offload import moves_components, streams_blocks
from wanjax.domain.ports import Denoiser, ImageEncoder, LoraSwitch, SpeechEncoder, TextEncoder, VideoAutoencoder
from wanjax.domain.settings import DenoiserSettings, ModelSettings, StartupSettings, TextEncoderSettings, VaeSettings
from wanjax.domain.sharding import MeshShape

if TYPE_CHECKING:
    from jax.sharding import Mesh

    from wanjax.adapters.jax.attention.xla import AttentionFn
    from wanjax.adapters.jax.transformer.experts import ExpertLoading
    from wanjax.adapters.jax.loading.weights_cache import ConvertedWeightsCache
    from wanjax.adapters.jax.platform.residency import Residency
    from wanjax.adapters.jax.sharding.activations import ActivationSharding
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.vae.runtime import VaeRuntime
    from wanjax.application.memory import MemoryPlanner
    from wanjax.application.preflight import RequestLoraCheck
    from wanjax.domain.sharding import LogicalRules

DEMO_MODEL = "demo"


def default_platform() -> str:
    """JAX's default platform ("cpu", "gpu" or "tpu"), which decides every `auto` setting."""
    import jax

    return jax.default_backend()


def locate_model(model: str) -> Path:
    """`demo` is the built-in demo (written on first use); anything else is a folder or repo id."""
    if model == DEMO_MODEL:
        from wanjax.adapters.demo.checkpoint import ensure_demo_checkpoint

        return ensure_demo_checkpoint()
    from wanjax.adapters.checkpoints.locate import locate_checkpoint

    return locate_checkpoint(model)


def replaced_files(model: ModelSettings) -> ReplacedFiles:
    """The component files `transformer_file`, ..., `image_encoder_file` name."""
    return ReplacedFiles(
        transformer=model.transformer_file, transformer_2=model.transformer_2_file, vae=model.vae_file,
        text_encoder=model.text_encoder_file, image_encoder=model.image_encoder_file,
    )  # fmt: skip


def open_checkpoint(folder: Path, model: ModelSettings) -> Checkpoint:
    """Opens `folder` (diffusers or official layout) and verifies every config and weight-file
    header: bad files fail here, before loading. Replaced component files are verified instead
    of the folder's own, which then need not be there."""
    from wanjax.adapters.checkpoints.layout import open_checkpoint_folder

    checkpoint = open_checkpoint_folder(folder, replaced_files(model))
    checkpoint.verify()
    return checkpoint


def build_text_encoder(checkpoint: Checkpoint, settings: TextEncoderSettings, offload: str = "none") -> TextEncoder:
    """UMT5 on the section's backend, in its dtype (torch.compile'd with `compile`); with an
    embeddings cache folder wrapped in a `CachedTextEncoder`, which builds it (imports torch, or
    puts the JAX encoder's weights on the device) only when a prompt batch is not cached. With
    `offload` (decided) components or all, the JAX encoder's weights wait in host memory."""
    files = checkpoint.text_encoder_files()

    def umt5() -> TextEncoder:
        if settings.backend == "jax":
            from wanjax.adapters.jax.text.encoder import JaxUmt5TextEncoder

            return JaxUmt5TextEncoder.from_files(files, dtype=settings.dtype, residency=_residency(offload))
        from wanjax.adapters.torch.umt5 import Umt5TextEncoder

        return Umt5TextEncoder.from_files(files, dtype=settings.dtype, compile=settings.compile)

    from wanjax.application.caches import cache_folder

    folder = cache_folder(settings.embeddings_cache_dir, "text")
    if folder is None:
        return umt5()
    from wanjax.adapters.text_embeddings import CachedTextEncoder, encoder_identity

    identity = encoder_identity(
        (files.weights, files.preprocessing),
        {"dtype": settings.dtype, "compile": settings.compile, "backend": settings.backend},
    )
    return CachedTextEncoder(umt5, folder, identity)


def check_tokenizer(checkpoint: Checkpoint, settings: TextEncoderSettings) -> None:
    """Refuses, before any weights load, a tokenizer folder that the section's backend cannot
    build: the JAX encoder's reads tokenizer.json; the torch one's is whatever transformers'
    `AutoTokenizer` builds."""
    folder = checkpoint.text_encoder_files().preprocessing
    if folder is None:
        return
    if settings.backend == "jax":
        from wanjax.adapters.text.tokenizer import require_tokenizer_json

        require_tokenizer_json(folder)
        return
    from wanjax.adapters.torch.tokenizer_files import check_auto_tokenizer

    check_auto_tokenizer(folder)


def build_image_encoder(checkpoint: Checkpoint, dtype: str) -> ImageEncoder | None:
    """The CLIP image encoder where the checkpoint has one (Wan 2.1 I2V), else None."""
    files = checkpoint.image_encoder_files()
    if files is None:
        return None
    from wanjax.adapters.torch.clip_image import ClipImageEncoder

    return ClipImageEncoder.from_files(files, dtype=dtype)


def build_speech_encoder(checkpoint: Checkpoint, dtype: str) -> SpeechEncoder | None:
    """The wav2vec2 speech encoder where the checkpoint has one (Wan 2.2 S2V), else None."""
    folder = checkpoint.speech_encoder_folder()
    if folder is None:
        return None
    from wanjax.adapters.torch.wav2vec2 import Wav2Vec2SpeechEncoder

    return Wav2Vec2SpeechEncoder.from_folder(folder, dtype=dtype)


def blockwise_attention() -> AttentionFn:
    """Online-softmax attention in plain XLA: memory bounded by its blocks, on every platform."""
    from wanjax.adapters.jax.attention.blockwise import BlockwiseAttention

    return BlockwiseAttention()


def sage_attention() -> AttentionFn:
    """The blockwise kernel with q k^T in int8 and p v in fp8 (SageAttention-style), on every platform."""
    from wanjax.adapters.jax.attention.sage import sage_attention as blockwise_sage

    return blockwise_sage()


def pallas_sage_attention() -> AttentionFn:
    """Our Pallas kernel with q k^T in int8 and p v in fp8 (SageAttention-style): Triton on GPUs,
    interpreted (slowly) on CPU."""
    from wanjax.adapters.jax.attention.sage import pallas_sage_attention as pallas_sage

    return pallas_sage()


def cudnn_attention() -> AttentionFn:
    """cuDNN flash attention, our Pallas kernel where cuDNN does not apply; a ConfigError off GPUs."""
    from wanjax.adapters.jax.attention.cudnn import CudnnAttention

    return CudnnAttention()


def xla_attention(platform: str) -> AttentionFn:
    """The exact reference: `jax.nn.dot_product_attention` over the whole logit matrix."""
    from wanjax.adapters.jax.attention.xla import XlaAttention, key_alignment_for

    return XlaAttention(key_alignment=key_alignment_for(platform))


def pallas_attention() -> AttentionFn:
    """Our Pallas flash attention: compiled on GPU (Triton) and TPU (Mosaic), interpreted (slowly) on CPU."""
    from wanjax.adapters.jax.attention.pallas import PallasAttention

    return PallasAttention()


def tokamax_attention(platform: str) -> AttentionFn:
    """tokamax's kernels; a ConfigError naming the fix where tokamax is missing or has no kernels (CPU)."""
    from wanjax.adapters.jax.attention.tokamax import TokamaxAttention
    from wanjax.adapters.jax.attention.xla import key_alignment_for

    return TokamaxAttention(key_alignment=key_alignment_for(platform))


def build_mesh(shape: MeshShape, context_parallel: str, checkpoint: Checkpoint) -> Mesh | None:
    """The device mesh of `shape`, or None for one device. Checks the sizes against the devices
    there are and the transformer's attention heads."""
    if shape.is_single_device:
        return None
    shape.check_heads(checkpoint.transformer_spec.num_attention_heads, context_parallel)
    from wanjax.adapters.jax.sharding.mesh import build_mesh as mesh_over_devices

    return mesh_over_devices(shape)


def ulysses_attention(mesh: Mesh | None, shape: MeshShape, attention: AttentionFn) -> AttentionFn | None:
    """Context-parallel self-attention by all-to-all over the context axis, `attention` on each
    device; None without a context axis (the blocks then use `attention` itself)."""
    if mesh is None or shape.context == 1:
        return None
    from wanjax.adapters.jax.attention.context_parallel import UlyssesAttention

    return UlyssesAttention(mesh, attention)


def ring_attention(mesh: Mesh | None, shape: MeshShape) -> AttentionFn | None:
    """Context-parallel self-attention passing K/V blocks around the context axis; None without one."""
    if mesh is None or shape.context == 1:
        return None
    from wanjax.adapters.jax.attention.context_parallel import RingAttention

    return RingAttention(mesh)


def activation_sharding(mesh: Mesh | None, rules: LogicalRules) -> ActivationSharding | None:
    """Where the transformer pins its activations on `mesh` (None on one device)."""
    if mesh is None:
        return None
    from wanjax.adapters.jax.sharding.activations import ActivationSharding

    return ActivationSharding(mesh, rules)


def transformer_runtime(
    settings: DenoiserSettings,
    engine_dtype: str,
    attention: AttentionFn,
    self_attention: AttentionFn | None,
    sharding: ActivationSharding | None,
) -> TransformerRuntime:
    """How the experts run: the section's dtypes (with fp8 weights, all but the blocks' kernels
    stored in `engine_dtype`) and layer scan, the blocks' matmul (on a GPU a bf16 one takes the
    FFN's GELU into its epilogue), the attention kernels, the activations' mesh layout."""
    from wanjax.adapters.jax.platform.dtypes import jax_dtype
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime

    storage = engine_dtype if settings.is_fp8 else settings.weights_dtype
    matmul = {}
    if settings.matmul_dtype == "float8_e4m3fn":
        from wanjax.adapters.jax.platform.scaled_matmul import fp8_dot_general

        matmul = {"block_matmul": fp8_dot_general}
    # GELU in the matmul's epilogue where XLA fuses it there: cuBLASLt's GEMM on a GPU. Not after the
    # fp8 product, whose scales sit between GEMM and GELU: unfused, the GELU would round each step.
    in_epilogue = default_platform() == "gpu" and not matmul
    return TransformerRuntime(
        dtype=jax_dtype(settings.activations_dtype), param_dtype=jax_dtype(storage),
        scan_layers=settings.scan_layers, attention=attention, self_attention=self_attention,
        activation_sharding=sharding, activation_in_matmul_epilogue=in_epilogue, **matmul,
    )  # fmt: skip


def build_weights_cache(startup: StartupSettings) -> ConvertedWeightsCache | None:
    """The converted-weights cache (`weights_cache`, `weights_cache_dir`), or None."""
    from wanjax.application.caches import cache_folder

    location = cache_folder(startup.weights_cache_dir, "weights") if startup.weights_cache else None
    if location is None:
        return None
    from wanjax.adapters.jax.loading.weights_cache import ConvertedWeightsCache

    return ConvertedWeightsCache(location)


def decided_offload(planner: MemoryPlanner) -> str:
    """`offload` as set, or for `auto` as the memory plan decided (none, components, layers or all)."""
    return planner.offload()


def _residency(offload: str) -> Residency:
    """Where a component's weights wait between its uses, with `offload` (decided)."""
    from wanjax.adapters.jax.platform.residency import Residency

    return Residency(off_device=moves_components(offload))


def expert_loading(
    checkpoint: Checkpoint,
    settings: DenoiserSettings,
    runtime: TransformerRuntime,
    mesh: Mesh | None,
    rules: LogicalRules,
    weights_cache: ConvertedWeightsCache | None,
    offload: str = "none",
) -> ExpertLoading:
    """How the experts load: fp8 kernels where asked, from `weights_cache` where it has them,
    on a `mesh` each parameter placed with its sharding from `rules`, and with `offload`
    (decided) the blocks' weights (layers) or all of them (components, all) straight into host memory."""
    from wanjax.adapters.jax.transformer.experts import ExpertLoading
    from wanjax.adapters.jax.loading.staging import ReplicatedPlacement
    from wanjax.adapters.jax.platform.dtypes import jax_dtype
    from wanjax.adapters.jax.loading.placement import ShardedPlacement
    from wanjax.adapters.jax.sharding.rules import parameter_shardings
    from wanjax.adapters.jax.transformer.weights import abstract_transformer

    if mesh is not None and offload != "none":
        raise ConfigError(f"offload={offload} runs on one device: set the mesh sizes to 1, or offload=none")
    if mesh is None:
        placement = ReplicatedPlacement()
    else:
        model = abstract_transformer(checkpoint.transformer_spec, runtime)
        placement = ShardedPlacement(parameter_shardings(model, mesh, rules))
    kernel_dtype = jax_dtype(settings.weights_dtype) if settings.is_fp8 else None
    return ExpertLoading(
        runtime=runtime, kernel_dtype=kernel_dtype, cache=weights_cache, placement=placement,
        blocks_in_host_memory=streams_blocks(offload), all_in_host_memory=moves_components(offload),
    )  # fmt: skip


def build_denoiser(
    checkpoint: Checkpoint, settings: DenoiserSettings, loading: ExpertLoading, offload: str = "none"
) -> Denoiser:
    """The experts, loaded concurrently, with `loras` (the first expert's) and `loras_low`
    (Wan 2.2's low-noise expert's) merged into their weights as they load; every LoRA is
    checked against every expert before the first weight loads."""
    from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
    from wanjax.adapters.jax.denoising.program import DenoiserOptions
    from wanjax.adapters.jax.platform.dtypes import jax_dtype
    from wanjax.adapters.lora import with_loras

    per_expert = loras_per_expert(len(checkpoint.experts), settings.loras, settings.loras_low)
    weights = [with_loras(checkpoint.weights(e), specs) for e, specs in zip(checkpoint.experts, per_expert)]
    options = DenoiserOptions(
        use_kv_cache=settings.use_kv_cache,
        scan_diffusion_loop=settings.scan_diffusion_loop,
        scheduler_dtype=jax_dtype(settings.scheduler_dtype),
        stream_blocks=streams_blocks(offload),
        experts_off_device=moves_components(offload),
    )
    return JaxDenoiser(loading.load_all(checkpoint.transformer_spec, weights), options)


def request_lora_check(checkpoint: Checkpoint, settings: DenoiserSettings) -> RequestLoraCheck | None:
    """How a request's LoRAs are checked before anything loads; None without `request_loras`
    (a request carrying LoRAs is then refused)."""
    from wanjax.application.preflight import RequestLoraCheck

    return RequestLoraCheck(checkpoint) if settings.request_loras else None


def build_lora_switch(denoiser: Denoiser, settings: DenoiserSettings, offload: str = "none") -> LoraSwitch | None:
    """Requests' LoRAs merged on the device into a copy of the loaded experts' weights (with
    `request_loras`; else None), their factors cached up to `lora_cache_mb`; a ConfigError where
    `offload` (decided) keeps the blocks' weights in host memory."""
    if not settings.request_loras:
        return None
    if offload != "none":
        raise ConfigError(f"request_loras needs the weights on the device, but offload=auto chose offload={offload} "
                          "(they do not fit twice): merge the LoRAs at load (--lora) instead")  # fmt: skip
    from wanjax.adapters.jax.lora.switch import JaxLoraSwitch

    return JaxLoraSwitch(denoiser, cache_bytes=settings.lora_cache_mb * 2**20)


def vae_runtime(settings: VaeSettings) -> VaeRuntime:
    """The VAE's dtypes, chunks, convolution form and tiling; a ConfigError for tiles that would
    leave gaps."""
    from wanjax.adapters.jax.platform.dtypes import jax_dtype
    from wanjax.adapters.jax.vae.runtime import VaeRuntime, VaeTiling

    size, stride = settings.tile_size, settings.tile_stride
    tiling = VaeTiling(
        tile_sample_min_height=size, tile_sample_min_width=size,
        tile_sample_stride_height=stride, tile_sample_stride_width=stride,
    )  # fmt: skip
    return VaeRuntime(
        dtype=jax_dtype(settings.dtype),
        param_dtype=jax_dtype(settings.weights_dtype),
        decode_chunk=settings.decode_chunk,
        encode_chunk=settings.encode_chunk,
        convolution=settings.convolution,
        tiling=tiling if settings.tiling else None,
    )


def build_autoencoder(
    checkpoint: Checkpoint, runtime: VaeRuntime, mesh: Mesh | None, offload: str = "none"
) -> VideoAutoencoder:
    """The VAE; on a `mesh` its decode splits the frames spatially over every device; with `offload`
    (decided) components or all its weights wait in host memory between the encode and the decode."""
    from wanjax.adapters.jax.vae.autoencoder import JaxVideoAutoencoder
    from wanjax.adapters.jax.vae.sharding import SpatialSharding
    from wanjax.adapters.jax.vae.weights import load_vae

    vae = load_vae(checkpoint.vae_spec, runtime, checkpoint.weights("vae"))
    return JaxVideoAutoencoder(vae, None if mesh is None else SpatialSharding(mesh), _residency(offload))
