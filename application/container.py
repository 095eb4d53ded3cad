"""The composition root: configuration in, a ready GenerationService out."""

from __future__ import annotations

from dependency_injector import containers, providers

from wanjax.application import builders
from wanjax.application.memory import MemoryPlanner
from wanjax.application.preflight import Preflight
from wanjax.application.service import GenerationService, ModelComponents
from wanjax.domain.config import GenerationConfig
from wanjax.domain.sharding import MeshShape, logical_rules


class Container(containers.DeclarativeContainer):
    """Singletons for everything heavy (weights, compiled code); override any provider in tests."""

    config = providers.Dependency(instance_of=GenerationConfig)

    checkpoint_folder = providers.Singleton(builders.locate_model, config.provided.model)
    replaced_files = providers.Singleton(builders.replaced_files, config)
    checkpoint = providers.Singleton(builders.open_checkpoint, checkpoint_folder, replaced_files)
    weights_cache = providers.Singleton(
        builders.build_weights_cache, config.provided.weights_cache, config.provided.weights_cache_dir
    )
    dtype = providers.Singleton(builders.resolve_dtype, config.provided.dtype)
    attention_backend = providers.Singleton(builders.attention_backend, config.provided.attention)
    attention = providers.Selector(
        attention_backend,
        xla=providers.Singleton(builders.xla_attention),
        blockwise=providers.Singleton(builders.blockwise_attention),
        cudnn=providers.Singleton(builders.cudnn_attention),
        pallas=providers.Singleton(builders.pallas_attention),
        tokamax=providers.Singleton(builders.tokamax_attention),
    )

    # Thread-safe: the denoiser and the VAE, which share it, are built on two threads.
    mesh = providers.ThreadSafeSingleton(builders.build_mesh, config, checkpoint)
    mesh_shape = providers.Singleton(MeshShape.of, config)
    sharding_rules = providers.Singleton(logical_rules, config.provided.logical_axis_rules)

    memory_planner = providers.Singleton(
        MemoryPlanner, config, checkpoint, dtype, attention_backend, mesh_shape
    )
    preflight = providers.Singleton(Preflight, config, checkpoint, mesh_shape, attention.provider, dtype)

    text_encoder = providers.Singleton(
        builders.build_text_encoder,
        checkpoint,
        dtype,
        config.provided.text_encoder_dtype,
        config.provided.compile_text_encoder,
        config.provided.text_embeddings_cache_dir,
    )
    denoiser = providers.Singleton(
        builders.build_denoiser,
        checkpoint,
        dtype,
        config.provided.scan_layers,
        attention,
        config.provided.loras,
        config.provided.loras_low,
        weights_dtype=config.provided.weights_dtype,
        weights_cache=weights_cache,
        activations_dtype=config.provided.activations_dtype,
        scheduler_dtype=config.provided.scheduler_dtype,
        use_kv_cache=config.provided.use_kv_cache,
        scan_diffusion_loop=config.provided.scan_diffusion_loop,
        mesh=mesh,
        rules=sharding_rules,
        context_parallel=config.provided.context_parallel,
    )
    autoencoder = providers.Singleton(builders.build_autoencoder, checkpoint, dtype, config, mesh)
    image_encoder = providers.Singleton(builders.build_image_encoder, checkpoint, dtype)

    components = providers.Singleton(
        ModelComponents,
        transformer_spec=checkpoint.provided.transformer_spec,
        vae_spec=checkpoint.provided.vae_spec,
        num_experts=providers.Callable(len, checkpoint.provided.experts),
        mesh_shape=mesh_shape,
        boundary_ratio=checkpoint.provided.boundary_ratio,
        image_conditioning=checkpoint.provided.image_conditioning,
        text_encoder=text_encoder.provider,
        denoiser=denoiser.provider,
        autoencoder=autoencoder.provider,
        image_encoder=image_encoder.provider,
    )
    service = providers.Singleton(
        GenerationService,
        components,
        max_sequence_length=config.provided.max_sequence_length,
        batched_text_encoder=config.provided.use_batched_text_encoder,
        preflight=preflight.provided.check,
    )


def build_container(config: GenerationConfig) -> Container:
    return Container(config=config)
