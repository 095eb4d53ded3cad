"""Every Wan pipeline class diffusers has (and SkyReels-V2's Diffusion Forcing ones), saved by its
own `save_pretrained` with each tokenizer kind a UMT5-style text encoder comes with, loaded through
the CLI: the classes whose components wanjax reads generate (Wan Animate given its driving videos,
refused by name without them)."""

import inspect
import shutil

import diffusers
import numpy as np
import pytest
from PIL import Image

from tiny_wan import (
    tiny_wan_animate_pipeline,
    tiny_wan_i2v_pipeline,
    tiny_wan_pipeline,
    tiny_wan_v2v_pipeline,
    tiny_wan_vace_pipeline,
    with_tokenizer,
)
from tiny_skyreels import tiny_skyreels_df_pipeline
from tokenizer_kinds import TOKENIZER_KINDS, write_tokenizer
from wanjax.adapters.checkpoints.diffusers_folder import SUPPORTED_PIPELINES
from wanjax.entrypoints.cli import main

SMALL = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "2", "--quiet"]
BUILDERS = {
    "WanPipeline": tiny_wan_pipeline,
    "WanImageToVideoPipeline": tiny_wan_i2v_pipeline,
    "WanVideoToVideoPipeline": tiny_wan_v2v_pipeline,
    "WanVACEPipeline": tiny_wan_vace_pipeline,
    "WanAnimatePipeline": tiny_wan_animate_pipeline,
    "SkyReelsV2DiffusionForcingPipeline": tiny_skyreels_df_pipeline,
    "SkyReelsV2DiffusionForcingImageToVideoPipeline": lambda: _as("SkyReelsV2DiffusionForcingImageToVideoPipeline"),
    "SkyReelsV2DiffusionForcingVideoToVideoPipeline": lambda: _as("SkyReelsV2DiffusionForcingVideoToVideoPipeline"),
}
"""Diffusion Forcing's three classes hold the same components: a video to extend is tested in
tests/integration/test_diffusion_forcing_cli.py; here the video-to-video folder makes a video from text."""


def _as(pipeline):
    return getattr(diffusers, pipeline)(**tiny_skyreels_df_pipeline().components)


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def test_every_wan_pipeline_class_of_diffusers_is_read_or_refused_by_name():
    prefixes = ("Wan", "SkyReelsV2DiffusionForcing")
    exported = {name: getattr(diffusers, name) for name in dir(diffusers) if name.startswith(prefixes)}  # lazy module
    pipeline = diffusers.DiffusionPipeline
    classes = {name for name, value in exported.items() if inspect.isclass(value) and issubclass(value, pipeline)}
    assert classes == set(SUPPORTED_PIPELINES) == set(BUILDERS)


# Every class with the tokenizer kind diffusers saves by default, and each other kind with one class:
# the tokenizer folder is read the same way whichever class saved it (a run takes 5 to 15 s on two cores).
CASES = [(p, "tokenizer.json") for p in SUPPORTED_PIPELINES] + [
    ("WanImageToVideoPipeline", "spiece.model"), ("WanVACEPipeline", "byt5"),
]


def test_the_cases_cover_every_class_and_every_tokenizer_kind():
    assert {p for p, _ in CASES} == set(SUPPORTED_PIPELINES) and {k for _, k in CASES} == set(TOKENIZER_KINDS)


@pytest.mark.parametrize("pipeline, tokenizer_kind", CASES)
def test_a_saved_folder_generates_through_the_cli(tmp_path, pipeline, tokenizer_kind):
    model = _saved(BUILDERS[pipeline](), tokenizer_kind, tmp_path / "model")
    out = tmp_path / "frames.npy"
    args = ["--model", str(model), "--prompt", "a fox", *SMALL, *_inputs(pipeline, tmp_path), "--out", str(out)]
    assert main(["generate", *args, "--set", f"text_embeddings_cache_dir={tmp_path / 'text'}"]) == 0
    frames = np.load(out)
    assert frames.shape == (1, 5, 32, 48, 3) and frames.dtype == np.uint8


@pytest.mark.parametrize("tokenizer_kind", ["spiece.model", "byt5"])
def test_the_jax_text_encoder_names_the_tokenizer_json_it_needs(tmp_path, capsys, tokenizer_kind):
    model = _saved(tiny_wan_pipeline(), tokenizer_kind, tmp_path / "model")
    args = ["--model", str(model), "--prompt", "a fox", *SMALL, "--out", str(tmp_path / "frames.npy")]
    assert main(["generate", *args, "--set", "text_encoder_backend=jax"]) == 2
    err = capsys.readouterr().err
    assert f"{model / 'tokenizer'} has no tokenizer.json" in err and "text_encoder_backend=torch" in err


def test_a_wan_animate_folder_without_its_driving_videos_is_refused_naming_them(tmp_path, capsys):
    model = _saved(tiny_wan_animate_pipeline(), "tokenizer.json", tmp_path / "model")
    image = _inputs("WanImageToVideoPipeline", tmp_path)
    args = ["--model", str(model), "--prompt", "a fox", *SMALL, *image, "--out", str(tmp_path / "v.mp4")]
    assert main(["generate", *args]) == 2
    err = capsys.readouterr().err
    assert "Wan 2.2 Animate model: give the character (--image) with --pose-video and --face-video" in err
    assert not (tmp_path / "v.mp4").exists()


def test_a_modular_pipeline_folder_is_refused_naming_what_to_save_instead(tmp_path, capsys):
    from diffusers import ModularPipeline

    _saved(tiny_wan_pipeline(), "tokenizer.json", tmp_path / "standard")
    modular = ModularPipeline.from_pretrained(str(tmp_path / "standard"))
    modular.load_components()
    modular.save_pretrained(str(tmp_path / "modular"), overwrite_modular_index=True)
    args = ["--model", str(tmp_path / "modular"), "--prompt", "a fox", *SMALL, "--out", str(tmp_path / "v.mp4")]
    assert main(["generate", *args]) == 2
    err = capsys.readouterr().err
    assert "is a diffusers modular pipeline folder (modular_model_index.json" in err and "WanPipeline" in err


def _saved(pipe, tokenizer_kind, folder):
    """`pipe` with a tokenizer of `tokenizer_kind`, saved by diffusers into `folder`."""
    if tokenizer_kind != "tokenizer.json":
        pipe = with_tokenizer(pipe, tokenizer_kind)
    pipe.save_pretrained(folder)
    if tokenizer_kind == "spiece.model":  # transformers 5 saved it as tokenizer.json: back to the sentencepiece form
        shutil.rmtree(folder / "tokenizer")
        write_tokenizer(folder / "tokenizer", tokenizer_kind)
    assert (folder / "model_index.json").is_file()
    return folder


def _inputs(pipeline, folder):
    """The input each pipeline's mode takes: a first frame, a source video, a control video, a
    character with its pose and face videos."""
    frames = np.random.default_rng(0).integers(0, 256, (5, 32, 48, 3), dtype=np.uint8)
    if pipeline in ("WanImageToVideoPipeline", "SkyReelsV2DiffusionForcingImageToVideoPipeline"):
        Image.fromarray(frames[0]).save(folder / "first.png")
        return ["--image", str(folder / "first.png")]
    if pipeline in ("WanVideoToVideoPipeline", "WanVACEPipeline"):
        return ["--video", str(_frame_folder(folder / "video", frames))]
    if pipeline == "WanAnimatePipeline":  # one segment of 5 frames; the face video stretched to 16x16
        Image.fromarray(frames[0]).save(folder / "character.png")
        pose, face = _frame_folder(folder / "pose", frames), _frame_folder(folder / "face", frames[:, :24, :20])
        return ["--image", str(folder / "character.png"), "--pose-video", str(pose), "--face-video", str(face),
                "--set", "segment_frame_length=5"]  # fmt: skip
    return []


def _frame_folder(folder, frames):
    folder.mkdir()
    for i, frame in enumerate(frames):
        Image.fromarray(frame).save(folder / f"{i}.png")
    return folder
