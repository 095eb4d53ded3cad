"""The generation service with fake components swapped in through the container."""

from types import SimpleNamespace

import numpy as np
import pytest
from dependency_injector import providers
from fakes import FakeAutoencoder, FakeDenoiser, FakeTextEncoder

from wanjax.application.container import build_container
from wanjax.domain.config import GenerationConfig
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.scheduling import unipc_table
from wanjax.domain.settings import TextEncoderSettings
from wanjax.domain.specs import TransformerSpec, VaeSpec


@pytest.fixture
def fakes():
    return SimpleNamespace(text=FakeTextEncoder(), denoiser=FakeDenoiser(), vae=FakeAutoencoder(), builds=[])


@pytest.fixture
def container(fakes):
    config = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9, num_inference_steps=6, max_sequence_length=5))
    container = build_container(config)
    checkpoint = SimpleNamespace(
        transformer_spec=TransformerSpec(), vae_spec=VaeSpec(), experts=("transformer",), boundary_ratio=None,
        image_conditioning=ImageConditioning.NONE, image_encoder_files=lambda: None,
        speech_encoder_folder=lambda: None,
    )
    container.checkpoint.override(providers.Object(checkpoint))

    def built(fake):
        fakes.builds.append(type(fake).__name__)
        return fake

    container.text_encoder.override(providers.Singleton(built, fakes.text))
    container.tokenizer_check.override(providers.Object(None))  # the fake encoder has no tokenizer
    container.denoiser.override(providers.Singleton(built, fakes.denoiser))
    container.autoencoder.override(providers.Singleton(built, fakes.vae))
    return container


def test_plan_and_conditioning_reach_the_denoiser(container, fakes):
    config = container.config()
    result = container.service().generate(config.request("a cat", negative_prompt="dull"))
    plan = fakes.denoiser.plans[0]
    np.testing.assert_array_equal(plan.timesteps, unipc_table(6, config.sampling.flow_shift).timesteps)
    assert fakes.text.calls == [["a cat", "dull"]]  # one batched encoder call
    assert fakes.denoiser.contexts == [((1, 5, 8), (1, 5, 8))]
    assert fakes.vae.decoded == [(1, 3, 8, 12, 16)]
    assert result.array.shape == (1, 9, 64, 96, 3)


def test_components_load_once_for_many_generations(container, fakes):
    service = container.service()
    config = container.config()
    traces = [service.generate(config.request(f"prompt {i}")).trace for i in range(3)]
    assert sorted(fakes.builds) == ["FakeAutoencoder", "FakeDenoiser", "FakeTextEncoder"]
    assert "load" in traces[0].seconds and "load" not in traces[1].seconds


def test_guidance_off_skips_the_negative_prompt(container, fakes):
    container.service().generate(container.config().request("a cat", guidance_scale=1.0))
    assert fakes.text.calls == [["a cat"]]
    assert fakes.denoiser.contexts[0][1] is None
    assert not fakes.denoiser.plans[0].uses_guidance


def test_latent_output_is_in_diffusers_layout_and_skips_decoding(container, fakes):
    result = container.service().generate(container.config().request("a cat"), output_type="latent")
    assert result.array.shape == (1, 16, 3, 8, 12)
    assert fakes.vae.decoded == []


def test_initial_latents_are_checked_before_loading(container, fakes):
    with pytest.raises(InvalidRequestError, match=r"needs \(1, 16, 3, 8, 12\)"):
        container.service().generate(container.config().request("a cat"), initial_latents=np.zeros((1, 16, 3, 8, 8)))
    assert fakes.builds == []


def test_steps_are_reported(container, fakes):
    seen = []
    container.service().generate(container.config().request("a cat"), on_step=lambda d, t: seen.append((d, t)))
    assert seen == [(i, 6) for i in range(1, 7)]


class FakeImageEncoder:
    def __init__(self) -> None:
        self.calls = []

    def encode(self, images):
        self.calls.append([image.shape for image in images])
        return np.zeros((len(images), 5, 4), np.float32)


def _with_mode(container, fakes, mode, image_encoder=None):
    checkpoint = container.checkpoint()
    container.checkpoint.override(providers.Object(SimpleNamespace(**{**vars(checkpoint), "image_conditioning": mode})))
    container.image_encoder.override(providers.Object(image_encoder))
    return container.service()


PIXELS = np.zeros((20, 30, 3), np.uint8)


def test_i2v_conditioning_is_mask_and_image_latents_plus_image_tokens(container, fakes):
    encoder = FakeImageEncoder()
    service = _with_mode(container, fakes, ImageConditioning.CHANNELS, encoder)
    service.generate(container.config().request("a cat", image=PIXELS))
    conditioning = fakes.denoiser.conditionings[0]
    assert conditioning.extra_channels.shape == (1, 3, 8, 12, 4 + 16)
    mask = conditioning.extra_channels[..., :4]
    assert (mask[:, 0] == 1).all() and (mask[:, 1:] == 0).all()
    assert fakes.vae.encoded == [((20, 30, 3), 64, 96, 9)]  # the image, then num_frames - 1 zero frames
    assert encoder.calls == [[(20, 30, 3)]] and conditioning.image_context.shape == (1, 5, 4)


def test_ti2v_conditioning_is_the_first_latent_frame_and_optional(container, fakes):
    service = _with_mode(container, fakes, ImageConditioning.FIRST_FRAME)
    service.generate(container.config().request("a cat", image=PIXELS))
    service.generate(container.config().request("a cat"))
    with_image, text_only = fakes.denoiser.conditionings
    assert with_image.first_frame.shape == (1, 1, 8, 12, 16) and with_image.extra_channels is None
    assert fakes.vae.encoded == [((20, 30, 3), 64, 96, 1)]
    assert text_only.first_frame is None


def test_missing_image_for_i2v_fails_before_loading(container, fakes):
    service = _with_mode(container, fakes, ImageConditioning.CHANNELS)
    with pytest.raises(InvalidRequestError, match="give the first frame"):
        service.generate(container.config().request("a cat"))
    assert fakes.builds == []


def test_the_config_preflight_runs_once_before_the_load_and_never_beside_it():
    """A submission checked while the server's worker loads the model must not run the preflight
    then: both resolve container singletons whose providers are not thread-safe."""
    import threading

    from wanjax.application.service import GenerationService, ModelComponents

    building, release, seen = threading.Event(), threading.Event(), []

    def denoiser():
        building.set()
        release.wait(30)
        return FakeDenoiser()

    components = ModelComponents(
        transformer_spec=TransformerSpec(), vae_spec=VaeSpec(), num_experts=1, boundary_ratio=None,
        image_conditioning=ImageConditioning.NONE, text_encoder=FakeTextEncoder, denoiser=denoiser,
        autoencoder=FakeAutoencoder, image_encoder=lambda: None,
    )  # fmt: skip
    prompts = TextEncoderSettings(max_sequence_length=5)
    service = GenerationService(components, prompts, preflight=lambda: seen.append(building.is_set()))
    request = GenerationConfig.from_mapping(dict(height=64, width=96, num_frames=9)).request("a cat")
    loader = threading.Thread(target=service.load)
    loader.start()
    try:
        assert building.wait(30)
        checker = threading.Thread(target=service.check, args=([request],))
        checker.start()
        checker.join(30)
        assert not checker.is_alive(), "a check waited for the load"
    finally:
        release.set()
        loader.join()
    assert seen == [False]
