"""Bad input: a clear error naming the problem, raised before any weights load, no output left."""

import json
import os
import shutil
import time
from pathlib import Path

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


# A refusal before loading takes 0.1-0.5 s in this process; the bound leaves room for a loaded
# 2-core machine and still fails if a model (seconds) were loaded first.
TIME_TO_FAIL_SECONDS = 2.0


def _fails(tmp_path, capsys, args, *expected, out=None):
    out = out or tmp_path / "out.mp4"
    before = _listing(tmp_path)
    started = time.monotonic()
    assert main(["generate", "--prompt", "a fox", "--out", str(out), *args]) == 2
    elapsed = time.monotonic() - started
    message = capsys.readouterr().err
    assert message.startswith("wanjax: error: ") and "Traceback" not in message, message
    for text in expected:
        assert text in message, message
    assert elapsed < TIME_TO_FAIL_SECONDS
    assert _listing(tmp_path) == before  # no output, no temporary, no folder made
    return message


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


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


def test_an_output_under_a_file_is_refused_before_generating(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    for out in (tmp_path / "notes.txt" / "v.mp4", tmp_path / "notes.txt" / "deeper" / "v.npy"):
        _fails(tmp_path, capsys, [], f"{tmp_path / 'notes.txt'} is a file, not a folder", out=out)


def test_an_output_folder_where_no_file_can_be_made_is_refused_before_generating(tmp_path, capsys):
    if os.geteuid() == 0:  # root writes into read-only folders; sysfs refuses new files even to root
        folder = Path("/sys/kernel")
    else:
        folder = tmp_path / "read-only"
        folder.mkdir(mode=0o555)
    if os.access(folder, os.W_OK) and os.geteuid() != 0:
        pytest.skip(f"{folder} is writable here")
    _fails(tmp_path, capsys, [], f"cannot create files in {folder}", "choose a writable folder", out=folder / "v.mp4")


def test_an_output_that_cannot_fit_the_disk_is_refused_before_generating(tmp_path, capsys, monkeypatch):
    import wanjax.application.outputs as outputs

    real = shutil.disk_usage
    monkeypatch.setattr(outputs.shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    message = _fails(tmp_path, capsys, ["--height", "32", "--width", "48", "--num-frames", "5"], "0.0 MiB free")
    assert "needs up to 0.0 MiB" in message  # 5 x 32 x 48 x 1.5 bytes: 11,520
