"""Builder functions the container points at. Each imports its backend inside, so building a
container (or a JAX-only run) never imports torch, and nothing heavy loads before it is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wanjax.adapters.checkpoints.checkpoint import Checkpoint, ReplacedFiles
from wanjax.domain.lora import loras_per_expert
from wanjax.domain.config import GenerationConfig
from wanjax.domain.ports import Denoiser, ImageEncoder, TextEncoder, VideoAutoencoder

DEMO_MODEL = "demo"


def locate_model(model: str) -> Path:
    """`demo` is the built-in demo (written on first use); anything else is a folder or repo id."""
    if model == DEMO_MODEL:
        from wanjax.adapters.demo.checkpoint import ensure_demo_checkpoint

        return ensure_demo_checkpoint()
    from wanjax.adapters.checkpoints.locate import locate_checkpoint

    return locate_checkpoint(model)


def replaced_files(config: GenerationConfig) -> ReplacedFiles:
    """The component files config `transformer_file`, ..., `image_encoder_file` give."""
    return ReplacedFiles(
        transformer=config.transformer_file, transformer_2=config.transformer_2_file, vae=config.vae_file,
        text_encoder=config.text_encoder_file, image_encoder=config.image_encoder_file,
    )  # fmt: skip


def open_checkpoint(folder: Path, replaced: ReplacedFiles = ReplacedFiles()) -> Checkpoint:
    """Opens `folder` (diffusers or official layout) and verifies every config and weight-file
    header: bad files fail here, before loading. `replaced` files are verified instead of the
    folder's own, which then need not be there."""
    from wanjax.adapters.checkpoints.layout import open_checkpoint_folder

    checkpoint = open_checkpoint_folder(folder, replaced)
    checkpoint.verify()
    return checkpoint


def resolve_dtype(name: str) -> str:
    """`auto` is bfloat16 on accelerators and float32 on CPU."""
    if name != "auto":
        return name
    import jax

    return "float32" if jax.default_backend() == "cpu" else "bfloat16"


def build_text_encoder(
    checkpoint: Checkpoint,
    dtype: str,
    encoder_dtype: str = "auto",
    compile_encoder: bool = False,
    embeddings_cache_dir: str | None = None,
) -> TextEncoder:
    """UMT5 in `encoder_dtype` (`auto`: as `dtype`), torch.compile'd with `compile_encoder`; with
    `embeddings_cache_dir` (config `text_embeddings_cache_dir`) wrapped in a `CachedTextEncoder`,
    which builds it (imports torch) only when a prompt batch is not cached."""
    files = checkpoint.text_encoder_files()
    encoder_dtype = dtype if encoder_dtype == "auto" else encoder_dtype

    def umt5() -> TextEncoder:
        from wanjax.adapters.torch.umt5 import Umt5TextEncoder

        return Umt5TextEncoder.from_files(files, dtype=encoder_dtype, compile=compile_encoder)

    from wanjax.application.caches import cache_folder

    folder = cache_folder(embeddings_cache_dir, "text")
    if folder is None:
        return umt5()
    from wanjax.adapters.text_embeddings import CachedTextEncoder, encoder_identity

    settings = {"dtype": encoder_dtype, "compile": compile_encoder}
    identity = encoder_identity((files.weights, files.preprocessing), settings)
    return CachedTextEncoder(umt5, folder, identity)


def build_image_encoder(checkpoint: Checkpoint, dtype: str) -> ImageEncoder | None:
    """The CLIP image encoder where the checkpoint has one (Wan 2.1 I2V), else None."""
    files = checkpoint.image_encoder_files()
    if files is None:
        return None
    from wanjax.adapters.torch.clip_image import ClipImageEncoder

    return ClipImageEncoder.from_files(files, dtype=dtype)


def attention_backend(name: str) -> str:
    """The attention backend config `attention` runs on JAX's default platform (`auto` resolved)."""
    import jax

    from wanjax.domain.attention import resolve_attention

    return resolve_attention(name, jax.default_backend())


def blockwise_attention() -> Any:
    """Online-softmax attention in plain XLA: memory bounded by its blocks, on every platform."""
    from wanjax.adapters.jax.blockwise_attention import BlockwiseAttention

    return BlockwiseAttention()


def cudnn_attention() -> Any:
    """cuDNN flash attention, our Pallas kernel where cuDNN does not apply; a ConfigError off GPUs."""
    from wanjax.adapters.jax.cudnn_attention import CudnnAttention

    return CudnnAttention()


def xla_attention() -> Any:
    import jax

    from wanjax.adapters.jax.attention import XlaAttention, key_alignment_for

    return XlaAttention(key_alignment=key_alignment_for(jax.default_backend()))


def pallas_attention() -> Any:
    """Our Pallas flash attention: compiled on GPU (Triton) and TPU (Mosaic), interpreted (slowly) on CPU."""
    from wanjax.adapters.jax.pallas_attention import PallasAttention

    return PallasAttention()


def tokamax_attention() -> Any:
    """tokamax's kernels; a ConfigError naming the fix where tokamax is missing or has no kernels (CPU)."""
    import jax

    from wanjax.adapters.jax.attention import key_alignment_for
    from wanjax.adapters.jax.tokamax_attention import TokamaxAttention

    return TokamaxAttention(key_alignment=key_alignment_for(jax.default_backend()))


def build_mesh(config: GenerationConfig, checkpoint: Checkpoint) -> Any:
    """The device mesh of config mesh_data/fsdp/tensor/context, or None for one device (all 1).
    Checks the sizes against the devices there are and the transformer's attention heads."""
    from wanjax.domain.sharding import MeshShape

    shape = MeshShape.of(config)
    if shape.is_single_device:
        return None
    shape.check_heads(checkpoint.transformer_spec.num_attention_heads, config.context_parallel)
    from wanjax.adapters.jax.sharding.mesh import build_mesh as mesh_over_devices

    return mesh_over_devices(shape)


def _on_mesh(loading: Any, spec: Any, attention: Any, mesh: Any, rules: Any, context_parallel: str) -> Any:
    """`loading` (an ExpertLoading) onto `mesh`: every parameter placed with its NamedSharding from
    `rules`, activations pinned by them, and over a context axis context-parallel self-attention
    (`context_parallel`: ulysses or ring) with `attention` as its per-device kernel."""
    import attrs

    from wanjax.adapters.jax.context_parallel import RingAttention, UlyssesAttention
    from wanjax.adapters.jax.sharding.activations import ActivationSharding
    from wanjax.adapters.jax.sharding.placement import ShardedPlacement
    from wanjax.adapters.jax.sharding.rules import parameter_shardings
    from wanjax.adapters.jax.transformer.weights import abstract_transformer

    self_attention = None
    if mesh.shape["context"] > 1:
        self_attention = UlyssesAttention(mesh, attention) if context_parallel == "ulysses" else RingAttention(mesh)
    runtime = attrs.evolve(
        loading.runtime, activation_sharding=ActivationSharding(mesh, rules), self_attention=self_attention
    )
    placement = ShardedPlacement(parameter_shardings(abstract_transformer(spec, runtime), mesh, rules))
    return attrs.evolve(loading, runtime=runtime, placement=placement)


def build_weights_cache(enabled: bool, folder: str) -> Any:
    """The converted-weights cache (config `weights_cache`, `weights_cache_dir`), or None."""
    from wanjax.application.caches import cache_folder

    location = cache_folder(folder, "weights") if enabled else None
    if location is None:
        return None
    from wanjax.adapters.jax.weights_cache import ConvertedWeightsCache

    return ConvertedWeightsCache(location)


def build_denoiser(
    checkpoint: Checkpoint,
    dtype: str,
    scan_layers: bool,
    attention: Any,
    loras: Sequence[str] = (),
    loras_low: Sequence[str] = (),
    *,
    weights_dtype: str = "auto",
    weights_cache: Any = None,
    activations_dtype: str = "auto",
    scheduler_dtype: str = "float32",
    use_kv_cache: bool = True,
    scan_diffusion_loop: bool = False,
    mesh: Any = None,
    rules: Any = None,
    context_parallel: str = "ulysses",
) -> Denoiser:
    """The experts, loaded concurrently, with `loras` (the first expert's) and `loras_low`
    (Wan 2.2's low-noise expert's), PATH[:SCALE] each, merged into their weights as they
    load. Every LoRA is checked against every expert before the first weight loads.

    `weights_dtype` stores the weights (`auto`: as `dtype`; `float8_e4m3fn`: the blocks'
    matmul kernels in fp8, the rest in `dtype`); `weights_cache` (from `build_weights_cache`)
    restores converted weights. `activations_dtype` (`auto`: as `dtype`) is the compute dtype.
    On a `mesh` (from `build_mesh`) the weights are placed by `rules` and self-attention is
    `context_parallel`; the rest are `DenoiserOptions`."""
    from wanjax.adapters.jax.denoising import DenoiserOptions, JaxDenoiser
    from wanjax.adapters.jax.dtypes import jax_dtype
    from wanjax.adapters.jax.transformer.experts import ExpertLoading
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.lora import with_loras

    fp8 = weights_dtype == "float8_e4m3fn"
    storage = dtype if weights_dtype == "auto" or fp8 else weights_dtype
    compute = dtype if activations_dtype == "auto" else activations_dtype
    runtime = TransformerRuntime(
        dtype=jax_dtype(compute), param_dtype=jax_dtype(storage), scan_layers=scan_layers, attention=attention
    )
    kernel_dtype = jax_dtype(weights_dtype) if fp8 else None
    loading = ExpertLoading(runtime=runtime, kernel_dtype=kernel_dtype, cache=weights_cache)
    if mesh is not None:
        loading = _on_mesh(loading, checkpoint.transformer_spec, attention, mesh, rules, context_parallel)
    per_expert = loras_per_expert(len(checkpoint.experts), loras, loras_low)
    weights = [with_loras(checkpoint.weights(e), specs) for e, specs in zip(checkpoint.experts, per_expert)]
    options = DenoiserOptions(
        use_kv_cache=use_kv_cache, scan_diffusion_loop=scan_diffusion_loop, scheduler_dtype=jax_dtype(scheduler_dtype)
    )
    return JaxDenoiser(loading.load_all(checkpoint.transformer_spec, weights), options)


def build_autoencoder(
    checkpoint: Checkpoint, dtype: str, config: GenerationConfig, mesh: Any = None
) -> VideoAutoencoder:
    """The VAE; on a `mesh` its decode splits the frames spatially over every device."""
    from wanjax.adapters.jax.autoencoder import JaxVideoAutoencoder
    from wanjax.adapters.jax.vae.sharding import SpatialSharding
    from wanjax.adapters.jax.vae.weights import load_vae

    vae = load_vae(checkpoint.vae_spec, vae_runtime(dtype, config), checkpoint.weights("vae"))
    return JaxVideoAutoencoder(vae, None if mesh is None else SpatialSharding(mesh))


def vae_runtime(dtype: str, config: GenerationConfig) -> Any:
    """The VAE's dtypes, chunks and tiling from `config` (its `auto` dtypes follow `dtype`)."""
    from wanjax.adapters.jax.dtypes import jax_dtype
    from wanjax.adapters.jax.vae.runtime import VaeRuntime, VaeTiling

    compute = dtype if config.vae_dtype == "auto" else config.vae_dtype
    storage = compute if config.vae_weights_dtype == "auto" else config.vae_weights_dtype
    size, stride = config.vae_tile_size, config.vae_tile_stride
    tiling = VaeTiling(
        tile_sample_min_height=size, tile_sample_min_width=size,
        tile_sample_stride_height=stride, tile_sample_stride_width=stride,
    )  # fmt: skip
    return VaeRuntime(
        dtype=jax_dtype(compute),
        param_dtype=jax_dtype(storage),
        decode_chunk=config.vae_decode_chunk,
        encode_chunk=config.vae_encode_chunk,
        tiling=tiling if config.vae_tiling else None,
    )
