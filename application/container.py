"""The composition root: configuration in, a ready GenerationService out.

Every adapter is built here, from its settings section (`GenerationConfig.resolved` decides
every `auto` once for the platform); backend choices are Selectors. Tests override any
provider (`container.text_encoder.override(...)`) to swap an adapter for a fake.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from wanjax.application import builders, job_stores
from wanjax.application.job_queue import JobQueue
from wanjax.application.memory import MemoryPlanner
from wanjax.application.preflight import Preflight
from wanjax.application.service import GenerationService, ModelComponents
from wanjax.application.store_queue import StoreQueue
from wanjax.domain.config import GenerationConfig
from wanjax.domain.jobs import JobStoreSettings
from wanjax.domain.sharding import logical_rules


class Container(containers.DeclarativeContainer):
    """Singletons for everything heavy (weights, compiled code)."""

    config = providers.Dependency(instance_of=GenerationConfig)
    """The config as given: presets, checkpoint and overrides layered, `auto` still undecided."""
    platform = providers.Singleton(builders.default_platform)
    settings = providers.ThreadSafeSingleton(GenerationConfig.resolved, config, platform)
    """The config with every `auto` decided for `platform`: what every builder reads."""

    checkpoint_folder = providers.Singleton(builders.locate_model, settings.provided.model.location)
    checkpoint = providers.Singleton(builders.open_checkpoint, checkpoint_folder, settings.provided.model)

    attention = providers.Selector(
        settings.provided.denoiser.attention,
        xla=providers.Singleton(builders.xla_attention, platform),
        blockwise=providers.Singleton(builders.blockwise_attention),
        cudnn=providers.Singleton(builders.cudnn_attention),
        pallas=providers.Singleton(builders.pallas_attention),
        tokamax=providers.Singleton(builders.tokamax_attention, platform),
        blockwise_sage=providers.Singleton(builders.sage_attention),
        pallas_sage=providers.Singleton(builders.pallas_sage_attention),
    )

    mesh_shape = settings.provided.mesh.shape
    # Thread-safe: the denoiser and the VAE, which share it, are built on two threads.
    mesh = providers.ThreadSafeSingleton(
        builders.build_mesh, mesh_shape, settings.provided.mesh.context_parallel, checkpoint
    )
    sharding_rules = providers.Singleton(logical_rules, settings.provided.mesh.logical_axis_rules)
    self_attention = providers.Selector(
        settings.provided.mesh.context_parallel,
        ulysses=providers.Singleton(builders.ulysses_attention, mesh, mesh_shape, attention),
        ring=providers.Singleton(builders.ring_attention, mesh, mesh_shape),
    )

    memory_planner = providers.Singleton(MemoryPlanner, settings, checkpoint)
    # `offload` decided: as set, or for `auto` the least the memory plan of the checked requests says fits
    offload = providers.Singleton(builders.decided_offload, memory_planner)
    
    text_encoder = providers.Singleton(
        builders.build_text_encoder, checkpoint, settings.provided.text_encoder, offload
    )
    image_encoder = providers.Singleton(builders.build_image_encoder, checkpoint, settings.provided.model.dtype)
    speech_encoder = providers.Singleton(builders.build_speech_encoder, checkpoint, settings.provided.model.dtype)

    transformer_runtime = providers.Singleton(
        builders.transformer_runtime,
        settings.provided.denoiser,
        settings.provided.model.dtype,
        attention,
        self_attention,
        providers.Singleton(builders.activation_sharding, mesh, sharding_rules),
    )
    expert_loading = providers.Singleton(
        builders.expert_loading,
        checkpoint,
        settings.provided.denoiser,
        transformer_runtime,
        mesh,
        sharding_rules,
        providers.Singleton(builders.build_weights_cache, settings.provided.startup),
        offload,
    )
    denoiser = providers.Singleton(
        builders.build_denoiser, checkpoint, settings.provided.denoiser, expert_loading, offload
    )
    lora_switch = providers.Singleton(builders.build_lora_switch, denoiser, settings.provided.denoiser, offload)

    vae_runtime = providers.Singleton(builders.vae_runtime, settings.provided.vae)
    autoencoder = providers.Singleton(builders.build_autoencoder, checkpoint, vae_runtime, mesh, offload)
    tokenizer_check = providers.Callable(builders.check_tokenizer, checkpoint, settings.provided.text_encoder)
    preflight = providers.Singleton(
        Preflight, settings, checkpoint, attention.provider, vae_runtime.provider, tokenizer_check.provider
    )

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
        lora_check=providers.Singleton(builders.request_lora_check, checkpoint, settings.provided.denoiser),
        lora_switch=lora_switch.provider,
        autoencoder=autoencoder.provider,
        image_encoder=image_encoder.provider,
        speech_encoder=speech_encoder.provider,
    )
    service = providers.Singleton(
        GenerationService, components, settings.provided.text_encoder, preflight=preflight.provided.check,
        attention_check=preflight.provided.check_attention,
    )

    job_settings = providers.Dependency(instance_of=JobStoreSettings)
    """`wanjax serve`'s only: where its jobs are kept."""
    job_store = providers.Selector(
        job_settings.provided.kind,
        sqlite=providers.Singleton(
            job_stores.sqlite_store,
            job_settings.provided.output_dir,
            providers.Resource(job_stores.folder_lock, job_settings.provided.output_dir),
        ),
        postgresql=providers.Singleton(job_stores.postgres_store, job_settings),
    )
    # Called with capacity=: where jobs wait, this server's own queue or the shared store
    job_queue = providers.Selector(
        job_settings.provided.kind,
        sqlite=providers.Factory(JobQueue),
        postgresql=providers.Factory(StoreQueue, job_store, config),
    )


def build_container(config: GenerationConfig, jobs: JobStoreSettings | None = None) -> Container:
    """The container of `config`; with `jobs`, a server's (its `job_store` and `job_queue`)."""
    return Container(config=config) if jobs is None else Container(config=config, job_settings=jobs)
