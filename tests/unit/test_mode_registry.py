"""The table of generation modes: which mode a request runs in on each model, that the table's
inputs are the request's, and that a new mode plugs in by its line in the table alone (its
inputs on the request, its CLI flag, its own generation loop)."""

from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import attrs
import numpy as np
import pytest

from fakes import FakeDenoiser, fake_service
from wanjax.domain.architectures import WAN21_I2V_14B, WAN21_T2V_14B, WAN21_VACE_1_3B
from wanjax.domain.batch import shared_request
from wanjax.domain.conditioning import Conditioning, ImageConditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs import kinds
from wanjax.domain.inputs.audio import AudioKind
from wanjax.domain.inputs.fields import Entrypoint, InputField
from wanjax.domain.modes import registry
from wanjax.domain.modes.base import GenerationMode, Generated, ModelTraits
from wanjax.domain.specs import VaeSpec
from wanjax.entrypoints.cli import build_parser

CONFIG = GenerationConfig.from_mapping(dict(height=32, width=48, num_frames=9, num_inference_steps=3, flow_shift=5.0))
IMAGE = np.zeros((8, 8, 3), np.uint8)
VIDEO = np.zeros((9, 8, 8, 3), np.uint8)


def traits(spec, image_conditioning=ImageConditioning.NONE):
    return ModelTraits(transformer=spec, vae=VaeSpec(), image_conditioning=image_conditioning)


@pytest.mark.parametrize(
    ("fields", "model", "mode"),
    [
        ({}, traits(WAN21_T2V_14B), "text-to-video"),
        ({}, traits(WAN21_T2V_14B, ImageConditioning.FIRST_FRAME), "text-to-video"),  # TI2V without an image
        ({"image": IMAGE}, traits(WAN21_I2V_14B, ImageConditioning.CHANNELS), "image-to-video"),
        ({"video": VIDEO, "strength": 0.5}, traits(WAN21_T2V_14B), "video-to-video"),
        ({}, traits(WAN21_VACE_1_3B), "VACE"),  # a VACE model's defaults: regenerate everything
        ({"control_video": np.zeros((9, 32, 48, 3), np.uint8)}, traits(WAN21_VACE_1_3B), "VACE"),
    ],
)
def test_the_mode_a_request_runs_in(fields, model, mode):
    assert registry.mode_for(CONFIG.request("a fox", **fields), model).name == mode


@pytest.mark.parametrize(
    ("fields", "model", "message"),
    [
        ({}, traits(WAN21_I2V_14B, ImageConditioning.CHANNELS), "give the first frame"),
        ({"video": VIDEO}, traits(WAN21_VACE_1_3B), "the video is the control video"),
        ({"mask": np.zeros((9, 32, 48), np.uint8)}, traits(WAN21_T2V_14B), "has no VACE blocks"),
    ],
)
def test_a_model_refuses_a_mode_it_cannot_run(fields, model, message):
    with pytest.raises(InvalidRequestError, match=message):
        registry.mode_for(CONFIG.request("a fox", **fields), model)


def test_vace_inputs_with_another_modes_input_are_refused_on_construction():
    with pytest.raises(InvalidRequestError, match="VACE takes no --image; give the inputs of one mode"):
        CONFIG.request("a fox", image=IMAGE, control_video=np.zeros((9, 32, 48, 3), np.uint8))


def test_the_tables_inputs_select_their_modes_and_one_file_field_is_one_input():
    files = {}
    for mode in registry.MODES:
        assert set(mode.selected_by) <= {field.name for field in mode.inputs}, mode.name
        assert len({field.flag for field in mode.inputs}) == len(mode.inputs), mode.name
        for field in mode.inputs:
            assert field.http is None or files.setdefault(field.http, field.name) == field.name, field.http
    cli, http = Entrypoint.CLI, Entrypoint.HTTP
    assert registry.mode_of_inputs(["--video"], lambda: traits(WAN21_VACE_1_3B), cli).name == "VACE"
    assert registry.mode_of_inputs(["--video"], lambda: traits(WAN21_T2V_14B), cli).name == "video-to-video"
    assert registry.mode_of_inputs(["--image", "--last-image"], lambda: pytest.fail("not ambiguous"), cli).name == (
        "first-last-frame-to-video"
    )
    # a client's files: read by the mode that takes them all, the one of fewest inputs where several do
    assert registry.mode_of_inputs(["input_reference"], None, http).name == "image-to-video"
    assert registry.mode_of_inputs(["input_reference", "pose_video", "face_video"], None, http).name == "animate"
    with pytest.raises(InvalidRequestError, match="no one generation mode takes video with pose_video"):
        registry.mode_of_inputs(["video", "pose_video"], None, http)
    with pytest.raises(InvalidRequestError, match="first-last-frame-to-video takes --image and --last-image; drop"):
        registry.mode_of_inputs(["--image", "--last-image", "--reference-image"], lambda: pytest.fail("no mode"), cli)


class TwoSegments(GenerationMode):
    """A mode of its own inputs (a sketch video, a mask) that owns its loop: a second denoising pass
    conditioned on the first's last latent frame, the two passes' frames emitted in turn (as Animate runs
    video segments)."""

    name = "two-segments"
    inputs = (
        InputField(name="sketch_video", flag="--sketch-video", kind=kinds.VIDEO, help="the poses to follow"),
        InputField(name="sketch_mask", flag="--sketch-mask", kind=kinds.MASK, help="where to follow them"),
    )
    selected_by = ("sketch_video",)

    def generate(self, run):
        first = run.denoise(run.noise, Conditioning())
        second = run.denoise(first.latents, Conditioning(first_frame=first.latents[:, -1:]))
        run.emit(run.decode(first.latents))
        run.emit(run.decode(second.latents))
        return Generated(latents=second.latents, cache_report=second.cache_report)


@pytest.fixture
def with_two_segments(monkeypatch):
    monkeypatch.setattr(registry, "MODES", (TwoSegments(), *registry.MODES))


def test_a_registered_modes_inputs_are_the_requests(with_two_segments):
    mode = registry.mode_of_inputs(
        ["--sketch-video", "--sketch-mask"], lambda: pytest.fail("not ambiguous"), Entrypoint.CLI
    )
    mask = np.zeros((9, 32, 48), np.uint8)
    request = CONFIG.request("a fox", sketch_video=VIDEO, sketch_mask=mask)
    assert registry.requested_mode(request) is mode and request.input("sketch_mask") is mask
    same = CONFIG.request("a cat", sketch_video=VIDEO.copy(), sketch_mask=mask)
    assert shared_request([request, same])
    with pytest.raises(InvalidRequestError, match="differs from request 0 in sketch_video"):
        shared_request([request, CONFIG.request("a cat", sketch_video=VIDEO + 1, sketch_mask=mask)])


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"pose": VIDEO}, "'pose' is no generation mode's input"),
        ({"sketch_video": IMAGE}, r"sketch_video=<ndarray \(8, 8, 3\)>: must be RGB frames, a uint8 array \[F, H, W"),
        ({"video": VIDEO, "last_image": IMAGE}, "video-to-video takes no --last-image; give the inputs of one mode"),
        ({"reference_image": IMAGE}, "must be a tuple of images"),
    ],
)
def test_a_modes_inputs_of_no_mode_or_kind_are_refused(with_two_segments, inputs, message):
    with pytest.raises(InvalidRequestError, match=message):
        registry.check_request(attrs.evolve(CONFIG.request("a fox"), inputs=inputs))


def test_a_registered_mode_owns_the_generation_loop(with_two_segments):
    denoiser = FakeDenoiser()
    service = fake_service(lambda: denoiser)
    result = service.generate(CONFIG.request("a fox", seed=3, sketch_video=VIDEO))
    first, second = denoiser.conditionings
    assert first.first_frame is None and second.first_frame.shape == (1, 1, 4, 6, 16)
    noise = np.random.default_rng(3).standard_normal((1, 3, 4, 6, 16)).astype(np.float32)
    np.testing.assert_allclose(second.first_frame, noise[:, -1:] * 3)  # the first pass's 3 steps
    assert result.array.shape == (1, 18, 32, 48, 3)  # two decoded passes of 9 frames


class HoldingSwitch:
    """A LoRA switch that counts its entries and says whether a run holds it."""

    def __init__(self) -> None:
        self.entered, self.held = 0, False

    @contextmanager
    def applied(self, loras):
        self.entered, self.held = self.entered + 1, True
        try:
            yield
        finally:
            self.held = False


def test_a_modes_loop_runs_under_one_lora_switch(with_two_segments):
    """The request's LoRAs are per request: the loop's denoising passes share one switch, held
    from the first until the mode's loop ends."""
    switch = HoldingSwitch()

    class Denoiser(FakeDenoiser):
        def denoise(self, *args, **kwargs):
            assert switch.held
            return super().denoise(*args, **kwargs)

    denoiser = Denoiser()
    service = fake_service(lambda: denoiser, lora_check=lambda loras: None, lora_switch=switch)
    service.generate(CONFIG.request("a fox", sketch_video=VIDEO))
    assert len(denoiser.plans) == 2 and switch.entered == 1 and not switch.held


def test_a_registered_modes_input_is_a_cli_flag(with_two_segments, capsys):
    args = build_parser().parse_args(["generate", "--prompt", "a fox", "--sketch-video", "sketches.mp4"])
    assert args.sketch_video == Path("sketches.mp4")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "--help"])
    assert "the poses to follow" in capsys.readouterr().out


def test_the_memory_plan_counts_what_the_mode_denoises_and_encodes():
    from wanjax.application.memory import DeviceSize, MemoryPlanner

    config = GenerationConfig.from_mapping(dict(height=96, width=96, num_frames=5, num_inference_steps=3, flow_shift=5.0))
    counted = SimpleNamespace(parameter_count=lambda: 1000)  # the specs alone: no VAE built for its count
    checkpoint = SimpleNamespace(
        transformer_spec=WAN21_VACE_1_3B, vae_spec=VaeSpec(), image_conditioning=ImageConditioning.NONE,
        experts=("transformer",), weights=lambda _: counted,
    )  # fmt: skip
    planner = MemoryPlanner(config.resolved("gpu"), checkpoint, DeviceSize(device=80 * 2**30))
    plain = planner.workload(config.request("a fox"))
    canvas = np.zeros((96, 96, 3), np.uint8)
    guided = planner.workload(config.request("a fox", reference_image=(canvas, canvas)))
    assert plain.vae_encode_frames == guided.vae_encode_frames == 5  # the control video (mid-grey, unless given)
    assert guided.tokens == plain.tokens * 4 // 2  # 2 latent frames of video, 2 more of references
    assert guided.latent_frames == plain.latent_frames == 2  # the decode: the video's alone


def test_every_flags_help_says_each_thing_once():
    """Modes that share a flag (`--image`: image-to-video's first frame, first-last-frame's too) join
    their help texts; the same text is said once."""
    commands = next(a for a in build_parser()._actions if a.choices).choices  # argparse's subcommands
    helps = {flag: action.help or "" for name in ("generate", "plan") for action in commands[name]._actions
             for flag in action.option_strings}  # fmt: skip
    for flag, text in helps.items():
        parts = text.split("; ")
        assert len(parts) == len(set(parts)), (flag, text)
    assert helps["--image"].count("first frame (png/jpg) for image-to-video models") == 1


class Speech(GenerationMode):
    """A mode of one audio input (as Wan 2.2 S2V's speech will be)."""

    name = "speech"
    inputs = (InputField(name="audio", flag="--audio", kind=AudioKind(sample_rate=16_000), http="audio",
                         help="speech (wav/mp3/flac)"),)  # fmt: skip
    selected_by = ("audio",)


def test_a_modes_audio_input_is_a_flag_read_through_the_audio_reader(monkeypatch, tmp_path):
    from test_audio_reader import _tone, _write

    from wanjax.entrypoints.flag_inputs import flag_inputs

    monkeypatch.setattr(registry, "MODES", (Speech(), *registry.MODES))
    path = _write(tmp_path / "speech.wav", _tone(8_000, 0.5)[None], 8_000, "pcm_s16le")
    args = build_parser().parse_args(["generate", "--prompt", "a fox", "--audio", str(path)])
    read = flag_inputs(args, CONFIG, lambda: traits(WAN21_T2V_14B))
    assert read["audio"].shape == (8_000,) and read["audio"].dtype == np.float32  # 0.5 s at 16 kHz
    request = CONFIG.request("a fox", **read)
    assert registry.requested_mode(request).name == "speech"
    planned = flag_inputs(args, CONFIG, lambda: traits(WAN21_T2V_14B), probed=True)
    assert planned["audio"].shape == (8_000,) and planned["audio"].strides == (0,)  # `wanjax plan`: a stand-in
    (tmp_path / "speech.wav").write_bytes(b"RIFF" + bytes(4) + b"WAVE" + bytes(8))
    with pytest.raises(InvalidRequestError, match=r"^--audio .*speech.wav is not a readable wav, mp3 or flac file"):
        flag_inputs(args, CONFIG, lambda: traits(WAN21_T2V_14B))
