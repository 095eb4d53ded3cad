"""Bad input: a clear error naming the problem, raised before any weights load, no output left."""

import json
import shutil

import pytest

from wanjax.domain.errors import CheckpointError
from wanjax.entrypoints.cli import main


@pytest.fixture(autouse=True)
def forbid_weight_loading(monkeypatch, demo_cache):
    """Every weight loader fails the test if reached: errors must come before any load."""

    def refuse(*args, **kwargs):
        raise AssertionError("weights were loaded before the bad input was reported")

    import wanjax.adapters.jax.transformer.weights as transformer_weights
    import wanjax.adapters.jax.vae.weights as vae_weights
    from wanjax.adapters.torch.umt5 import Umt5TextEncoder

    monkeypatch.setattr(transformer_weights, "load_transformer", refuse)
    monkeypatch.setattr(vae_weights, "load_vae", refuse)
    monkeypatch.setattr(Umt5TextEncoder, "from_folders", refuse)
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


@pytest.fixture
def checkpoint_copy(tiny_checkpoint, tmp_path):
    return shutil.copytree(tiny_checkpoint, tmp_path / "ckpt")


def _fails(tmp_path, capsys, args, *expected):
    out = tmp_path / "out.mp4"
    assert main(["generate", "--prompt", "a fox", "--out", str(out), *args]) == 2
    message = capsys.readouterr().err
    for text in expected:
        assert text in message, message
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".out.mp4")]
    return message


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--height", "500"], ["height=500", "multiple of 16"]),
        (["--width", "0"], ["width=0"]),
        (["--num-frames", "80"], ["num_frames=80", "4k+1", "77 or 81"]),
        (["--steps", "0"], ["num_inference_steps=0", ">= 1"]),
        (["--guidance-scale", "-2"], ["guidance_scale=-2.0", ">= 0"]),
        (["--seed", "-1"], ["seed=-1"]),
        (["--dtype", "float16"], ["dtype='float16'", "float32, bfloat16"]),
        (["--set", "flow_shfit=3"], ["unknown config key 'flow_shfit'", "Did you mean 'flow_shift'"]),
        (["--set", "scan_layers=perhaps"], ["scan_layers='perhaps'", "bool"]),
        (["--set", "novalue"], ["expected KEY=VALUE"]),
        (["--model", "wan3-preset-that-is-not"], ["checkpoint folder not found"]),
    ],
)
def test_invalid_flags(tmp_path, capsys, args, expected):
    _fails(tmp_path, capsys, args, *expected)


def test_unsupported_output_suffix(tmp_path, capsys):
    assert main(["generate", "--prompt", "a fox", "--out", str(tmp_path / "v.gif")]) == 2
    assert ".mp4 or .npy" in capsys.readouterr().err


def test_latents_of_the_wrong_shape(tmp_path, capsys):
    import numpy as np

    np.save(tmp_path / "noise.npy", np.zeros((1, 16, 3, 3, 3), np.float32))
    _fails(tmp_path, capsys, ["--latents", str(tmp_path / "noise.npy")], "initial latents have shape (1, 16, 3, 3, 3)")


def test_missing_checkpoint_folder(tmp_path, capsys):
    _fails(tmp_path, capsys, ["--model", str(tmp_path / "nowhere")], "checkpoint folder not found", "nowhere")


def test_missing_component_folder(tmp_path, capsys, checkpoint_copy):
    shutil.rmtree(checkpoint_copy / "tokenizer")
    _fails(tmp_path, capsys, ["--model", str(checkpoint_copy)], "component folder tokenizer/ is missing")


def test_corrupt_safetensors(tmp_path, capsys, checkpoint_copy):
    weights = checkpoint_copy / "vae" / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    _fails(tmp_path, capsys, ["--model", str(checkpoint_copy)], str(weights), "truncated")


def test_garbage_safetensors(tmp_path, capsys, checkpoint_copy):
    weights = checkpoint_copy / "transformer" / "diffusion_pytorch_model.safetensors"
    weights.write_bytes(b"this is not a safetensors file at all")
    _fails(tmp_path, capsys, ["--model", str(checkpoint_copy)], str(weights), "corrupt safetensors header")


def test_missing_shard(tmp_path, capsys, checkpoint_copy):
    from safetensors.numpy import load_file, save_file

    folder = checkpoint_copy / "transformer"
    single = folder / "diffusion_pytorch_model.safetensors"
    tensors = load_file(single)
    names = sorted(tensors)
    shards = {"diffusion_pytorch_model-00001-of-00002.safetensors": names[::2], "diffusion_pytorch_model-00002-of-00002.safetensors": names[1::2]}
    for shard, members in shards.items():
        save_file({n: tensors[n] for n in members}, folder / shard)
    index = {"metadata": {}, "weight_map": {n: s for s, members in shards.items() for n in members}}
    (folder / "diffusion_pytorch_model.safetensors.index.json").write_text(json.dumps(index))
    single.unlink()
    (folder / "diffusion_pytorch_model-00002-of-00002.safetensors").unlink()
    _fails(tmp_path, capsys, ["--model", str(checkpoint_copy)], "shard 'diffusion_pytorch_model-00002-of-00002.safetensors'", "missing")


def test_missing_model_index(tmp_path, capsys, checkpoint_copy):
    (checkpoint_copy / "model_index.json").unlink()
    _fails(tmp_path, capsys, ["--model", str(checkpoint_copy)], "model_index.json is missing")


def test_errors_are_checkpoint_errors_for_embedders(checkpoint_copy):
    from wanjax.application.container import build_container
    from wanjax.application.presets import resolve_config

    (checkpoint_copy / "vae" / "config.json").write_text("{ not json")
    with pytest.raises(CheckpointError, match="corrupt JSON"):
        build_container(resolve_config(str(checkpoint_copy))).service()


def test_unreadable_image(tmp_path, capsys):
    (tmp_path / "broken.png").write_bytes(b"\x89PNG not really")
    _fails(tmp_path, capsys, ["--image", str(tmp_path / "broken.png")], "broken.png", "not a readable png/jpg")


def test_image_for_a_text_to_video_model(tmp_path, capsys):
    import numpy as np
    from PIL import Image

    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "frame.png")
    _fails(tmp_path, capsys, ["--image", str(tmp_path / "frame.png")], "text-to-video model and takes no image")


def test_a_video_that_cannot_fit_is_refused_with_the_estimate_and_the_fixes(tmp_path, capsys):
    message = _fails(
        tmp_path, capsys, ["--height", "4096", "--width", "4096", "--num-frames", "81"],
        "nothing was loaded", "estimated peak", "VAE decode activations", "--set vae_tiling=true",
    )  # fmt: skip
    assert "GiB free" in message
