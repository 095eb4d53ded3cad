"""Faults during a run of the demo model: each ends with one `wanjax: error:` line, a non-zero
exit and nothing written."""

import errno

import pytest

from wanjax.entrypoints.cli import main

SMALL = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "2", "--quiet"]


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _fails(tmp_path, capsys, args, *expected):
    assert main(["generate", "--prompt", "a fox", *SMALL, "--out", str(tmp_path / "v.mp4"), *args]) == 2
    err = capsys.readouterr().err
    message = err.splitlines()[-1]  # after transformers' own "Loading weights" bar
    assert message.startswith("wanjax: error: ") and "Traceback" not in err, err
    for text in expected:
        assert text in message, message
    assert list(tmp_path.iterdir()) == []
    return message


def test_a_disk_that_fills_during_the_write_ends_in_an_error_naming_the_file(tmp_path, capsys, monkeypatch):
    import wanjax.adapters.media.video_files as video_files

    real = video_files.rgb_to_yuv420p
    frames = []

    def disk_full_after_two_frames(frame):
        frames.append(frame)
        if len(frames) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(frame)

    monkeypatch.setattr(video_files, "rgb_to_yuv420p", disk_full_after_two_frames)
    _fails(tmp_path, capsys, [], f"cannot write {tmp_path / 'v.mp4'}: No space left on device", "it was not written")
    assert len(frames) == 3  # the mp4 was being written when the disk filled


def _demo_copy(demo_cache, tmp_path):
    import shutil

    return shutil.copytree(demo_cache, tmp_path.parent / f"{tmp_path.name}-model")


def _poison(weights, name):
    """`weights` (a safetensors file) with one value of tensor `name` set to NaN."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    tensors = load_file(weights)
    tensors[name] = tensors[name].copy()
    tensors[name].flat[0] = np.nan
    save_file(tensors, weights)


@pytest.mark.parametrize(
    "component, tensor, expected",
    [
        ("transformer", "proj_out.weight", "the denoised latents hold NaN or infinite values"),
        ("vae", "decoder.conv_out.weight", "the VAE decoded NaN or infinite values"),
    ],
)
def test_non_finite_weights_end_in_an_error_and_no_video(tmp_path, capsys, demo_cache, component, tensor, expected):
    model = _demo_copy(demo_cache, tmp_path)
    _poison(model / component / "diffusion_pytorch_model.safetensors", tensor)
    _fails(tmp_path, capsys, ["--model", str(model)], expected, "Likely causes")


def test_a_lora_with_nan_weights_is_refused_naming_the_file_and_keys(tmp_path, capsys):
    import numpy as np
    from safetensors.numpy import save_file

    lora = tmp_path.parent / f"{tmp_path.name}-nan.safetensors"
    key = "transformer.blocks.0.attn1.to_q"
    down = np.full((4, 64), 0.01, np.float32)
    down[2, 5] = np.nan
    save_file({f"{key}.lora_A.weight": down, f"{key}.lora_B.weight": np.full((64, 4), 0.01, np.float32)}, str(lora))
    _fails(tmp_path, capsys, ["--lora", str(lora)], f"LoRA {lora}", f"'{key}.lora_A.weight'", "NaN or infinite")
