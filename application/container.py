"""The composition root: configuration in, a ready GenerationService out."""

from __future__ import annotations

from dependency_injector import containers, providers

from wanjax.application import builders
from wanjax.application.service import GenerationService, ModelComponents
from wanjax.domain.config import GenerationConfig


class Container(containers.DeclarativeContainer):
    """Singletons for everything heavy (weights, compiled code); override any provider in tests."""

    config = providers.Dependency(instance_of=GenerationConfig)

    checkpoint_folder = providers.Singleton(builders.locate_model, config.provided.model)
    checkpoint = providers.Singleton(builders.open_checkpoint, checkpoint_folder)
    dtype = providers.Singleton(builders.resolve_dtype, config.provided.dtype)
    attention = providers.Selector(
        config.provided.attention,
        xla=providers.Singleton(builders.xla_attention),
        pallas=providers.Singleton(builders.pallas_attention),
        tokamax=providers.Singleton(builders.tokamax_attention),
    )

    text_encoder = providers.Singleton(builders.build_text_encoder, checkpoint, dtype)
    denoiser = providers.Singleton(
        builders.build_denoiser, checkpoint, dtype, config.provided.scan_layers, attention
    )
    autoencoder = providers.Singleton(builders.build_autoencoder, checkpoint, dtype)
    image_encoder = providers.Singleton(builders.build_image_encoder, checkpoint, dtype)

    components = providers.Singleton(
        ModelComponents,
        transformer_spec=checkpoint.provided.transformer_spec,
        vae_spec=checkpoint.provided.vae_spec,
        num_experts=providers.Callable(len, checkpoint.provided.experts),
        boundary_ratio=checkpoint.provided.boundary_ratio,
        image_conditioning=checkpoint.provided.image_conditioning,
        text_encoder=text_encoder.provider,
        denoiser=denoiser.provider,
        autoencoder=autoencoder.provider,
        image_encoder=image_encoder.provider,
    )
    service = providers.Singleton(
        GenerationService, components, max_sequence_length=config.provided.max_sequence_length
    )


def build_container(config: GenerationConfig) -> Container:
    return Container(config=config)
