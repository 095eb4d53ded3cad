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
        (["--steps", "0"], ["num_inference_steps=0", "from 1 to 1000"]),
        (["--steps", "1000000000000"], ["num_inference_steps=1000000000000", "from 1 to 1000"]),
        (["--steps", "100000000"], ["num_inference_steps=100000000", "from 1 to 1000"]),
        (["--set", "flow_shift=1e300"], ["flow_shift=1e+300", "from 0.01 to 100"]),
        (["--set", "expert_switch_step=5000"], ["expert_switch_step=5000", "from 0 to 1000"]),
        (["--set", "fps=100000"], ["fps=100000", "from 1 to 1000"]),
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


def _demo_copy(demo_cache, tmp_path):
    return shutil.copytree(demo_cache, tmp_path / "model")


def _edit_json(path, **changes):
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _lora(path, *, alpha=None, metadata=None, shape=(64, 64), value=0.01):
    """A one-pair diffusers-style LoRA on the demo's first query projection (64 x 64)."""
    import numpy as np
    from safetensors.numpy import save_file

    key = "transformer.blocks.0.attn1.to_q"
    tensors = {
        f"{key}.lora_A.weight": np.full((4, shape[1]), value, np.float32),
        f"{key}.lora_B.weight": np.full((shape[0], 4), value, np.float32),
    }
    if alpha is not None:
        metadata = {"lora_adapter_metadata": json.dumps({"transformer.lora_alpha": alpha})}
    save_file(tensors, str(path), metadata=metadata)
    return path


# Non-finite and degenerate numbers (item 2 of "Bad input and faults")
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--guidance-scale", "inf"], ["argument --guidance-scale: 'inf'", "finite"]),
        (["--guidance-scale", "nan"], ["argument --guidance-scale: 'nan'", "finite"]),
        (["--guidance-scale", "1e30"], ["guidance_scale=1e+30", "at most 100"]),
        (["--guidance-scale-low=-inf"], ["argument --guidance-scale-low: '-inf'", "finite"]),
        (["--set", "flow_shift=inf"], ["flow_shift='inf'", "finite"]),
        (["--set", "sample_timesteps=1000,nan"], ["sample_timesteps='1000,nan'", "finite"]),
        (["--set", "magcache_thresh=nan"], ["magcache_thresh='nan'", "finite"]),
    ],
)
def test_non_finite_numbers_are_refused(tmp_path, capsys, args, expected):
    _fails(tmp_path, capsys, args, *expected)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_latents_holding_nan_or_inf_are_refused(tmp_path, capsys, bad):
    import numpy as np

    noise = np.zeros((1, 16, 2, 4, 6), np.float32)
    noise[0, 3, 1, 2, 2] = bad
    np.save(tmp_path / "noise.npy", noise)
    args = ["--height", "32", "--width", "48", "--num-frames", "5", "--latents", str(tmp_path / "noise.npy")]
    _fails(tmp_path, capsys, args, "initial latents hold 1 NaN or infinite value(s)")


def test_a_checkpoint_flow_shift_out_of_range_is_refused_naming_the_checkpoint(tmp_path, capsys, demo_cache):
    model = _demo_copy(demo_cache, tmp_path)
    _edit_json(model / "scheduler" / "scheduler_config.json", flow_shift=1e300)
    _fails(tmp_path, capsys, ["--model", str(model)], "flow_shift=1e+300", "from 0.01 to 100", f"checkpoint {model}")


def test_a_size_out_of_range_is_refused_before_a_reference_image_is_read(tmp_path, capsys, monkeypatch):
    import wanjax.adapters.media.readers as readers

    monkeypatch.setattr(readers, "read_input", lambda *a, **k: pytest.fail("media read first"))
    args = ["--height", "1000000000", "--reference-image", str(tmp_path / "any.png")]
    _fails(tmp_path, capsys, args, "height=1000000000", "from 16 to 16384")


def test_a_vae_config_with_a_zero_latents_std_is_refused(tmp_path, capsys, demo_cache):
    model = _demo_copy(demo_cache, tmp_path)
    _edit_json(model / "vae" / "config.json", latents_std=[1.0] * 15 + [0.0])
    _fails(tmp_path, capsys, ["--model", str(model)], f"{model / 'vae' / 'config.json'}", "latents_std=", "> 0")


@pytest.mark.parametrize("alpha", ["NaN", "Infinity", '"abc"', "[4]", "true"])
def test_a_lora_with_a_bad_lora_alpha_is_refused_before_loading(tmp_path, capsys, alpha):
    lora = _lora(tmp_path / "style.safetensors", alpha=json.loads(alpha))
    _fails(tmp_path, capsys, ["--lora", str(lora)], f"LoRA {lora}", "lora_alpha=", "finite number")


# Sizes past what the model can place (item 3)
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--height", "100000", "--width", "100000"], ["height=100000", "from 16 to 16384"]),
        (["--num-frames", "100001"], ["num_frames=100001", "from 1 to 4093"]),
        (["--set", "max_sequence_length=100000"], ["max_sequence_length=100000", "from 1 to 512"]),
        (["--height", "16384", "--width", "16384", "--num-frames", "4093"], ["nothing was loaded", "estimated peak"]),
    ],
)
def test_sizes_past_the_model_or_the_machine_are_refused(tmp_path, capsys, args, expected):
    _fails(tmp_path, capsys, args, *expected)


# Settings that used to fail only after the encoders and VAE had loaded (item 6)
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--set", "mesh_data=2"], ["mesh", "devices, but 1 are available"]),
        (["--set", "attention=tokamax"], ["tokamax"]),
        (["--set", "attention=cudnn"], ["cudnn", "GPU"]),
        (["--set", "vae_decode_chunk=0"], ["vae_decode_chunk=0", ">= 1, or none"]),
        (["--set", "vae_tile_size=128", "--set", "vae_tile_stride=192"], ["exceeds", "no larger than the tile"]),
    ],
)
def test_runtime_settings_are_refused_before_loading(tmp_path, capsys, args, expected):
    message = _fails(tmp_path, capsys, args, *expected)
    assert message.count("wanjax: error:") == 1


def test_a_lora_that_does_not_fit_the_model_is_refused_before_loading(tmp_path, capsys):
    lora = _lora(tmp_path / "other-model.safetensors", shape=(128, 64))
    _fails(tmp_path, capsys, ["--lora", str(lora)], f"LoRA {lora}", "do not fit their tensor", "(128, 4)")


def test_a_low_noise_lora_on_a_one_expert_model_is_refused_before_loading(tmp_path, capsys):
    lora = _lora(tmp_path / "low.safetensors")
    _fails(tmp_path, capsys, ["--lora-low", str(lora)], "loras_low (--lora-low)", "one transformer")


# Checkpoint configs checked like user input, no traceback (item 7)
@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"num_attention_heads": 0}, "num_attention_heads=0: must be a whole number >= 1"),
        ({"num_attention_heads": "four"}, "num_attention_heads='four'"),
        ({"patch_size": None}, "patch_size=None: must be three whole numbers"),
        ({"rope_max_seq_len": 0}, "rope_max_seq_len=0"),
        ({"attention_head_dim": 15}, "attention_head_dim=15: must be an even whole number"),
        ({"eps": -1}, "eps=-1: must be a number > 0"),
    ],
)
def test_a_transformer_config_with_bad_values_is_refused_naming_the_file(tmp_path, capsys, demo_cache, changes, expected):
    model = _demo_copy(demo_cache, tmp_path)
    _edit_json(model / "transformer" / "config.json", **changes)
    _fails(tmp_path, capsys, ["--model", str(model)], f"{model / 'transformer' / 'config.json'}: ", expected)


def test_lora_metadata_that_is_not_a_text_map_is_refused(tmp_path, capsys):
    import struct

    lora = _lora(tmp_path / "style.safetensors")
    raw = lora.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    header["__metadata__"] = ["not", "a", "map"]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    lora.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + length :])
    _fails(tmp_path, capsys, ["--lora", str(lora)], str(lora), "__metadata__ must map names to texts")


def test_an_image_too_large_to_decode_safely_is_refused(tmp_path, capsys, monkeypatch):
    import numpy as np
    from PIL import Image

    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(tmp_path / "huge.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 4096 pixels: over twice the limit, as a bomb is
    _fails(tmp_path, capsys, ["--image", str(tmp_path / "huge.png")], "huge.png", "too large to read safely")


@pytest.mark.parametrize("model", ["a/..", "org/name--x"])
def test_a_malformed_repo_id_is_refused(tmp_path, capsys, model, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _fails(tmp_path, capsys, ["--model", model], f"{model!r} is not a local folder and not a valid Hugging Face repo id")


# safetensors files the reference library rejects (item 8)
def _rewrite_header(path, edit, *, length_change=0):
    """`path` with its JSON header changed by `edit` (and its declared length off by `length_change`)."""
    import struct

    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text) + length_change) + text + raw[8 + length :])


def test_a_safetensors_header_whose_tensors_share_bytes_is_refused(tmp_path, capsys, demo_cache):
    model = _demo_copy(demo_cache, tmp_path)
    weights = model / "transformer" / "diffusion_pytorch_model.safetensors"

    def second_shares_the_first(header):
        names = sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"])
        first, second = next((a, b) for i, a in enumerate(names) for b in names[i + 1 :] if header[a]["shape"] == header[b]["shape"])
        header[second]["data_offsets"] = header[first]["data_offsets"]

    _rewrite_header(weights, second_shares_the_first)
    _fails(tmp_path, capsys, ["--model", str(model)], str(weights), "share bytes")


def test_a_safetensors_header_length_off_by_its_padding_is_refused(tmp_path, capsys, demo_cache):
    import struct

    model = _demo_copy(demo_cache, tmp_path)
    weights = model / "vae" / "diffusion_pytorch_model.safetensors"
    raw = weights.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    padding = length - len(raw[8 : 8 + length].rstrip(b" "))
    assert padding > 0  # the header is padded with spaces, as safetensors pads it
    # The JSON still parses, but every tensor would be read `padding` bytes early.
    weights.write_bytes(struct.pack("<Q", length - padding) + raw[8:])
    _fails(tmp_path, capsys, ["--model", str(model)], str(weights), f"{padding} byte(s) after the last tensor")


# Small ones (item 9)
def test_a_seed_that_overflows_for_later_prompts_names_the_seed_given(tmp_path, capsys):
    top = 2**63 - 1
    _fails(
        tmp_path, capsys, ["--seed", str(top), "--prompt", "a hare"],
        f"seed={top} with 2 prompts", f"at most {top - 1}",
    )  # fmt: skip


@pytest.mark.parametrize("model, preset", [("DEMO", "demo"), ("Wan2.1-T2V-1.3B", "wan2.1-t2v-1.3b")])
def test_a_preset_name_in_another_case_gets_a_did_you_mean(tmp_path, capsys, model, preset):
    _fails(tmp_path, capsys, ["--model", model], f"did you mean the preset {preset!r}")


def test_a_tokenizer_folder_without_a_tokenizer_is_refused(tmp_path, capsys, demo_cache):
    model = _demo_copy(demo_cache, tmp_path)
    (model / "tokenizer" / "tokenizer.json").unlink()  # its config names a tokenizers-backed class
    _fails(
        tmp_path, capsys, ["--model", str(model)],
        f"cannot load the tokenizer from {model / 'tokenizer'}", "none of tokenizer.json, spiece.model",
    )  # fmt: skip


def test_a_tokenizer_folder_without_tokenizer_json_is_refused_for_the_jax_text_encoder(tmp_path, capsys, demo_cache):
    model = _demo_copy(demo_cache, tmp_path)
    (model / "tokenizer" / "tokenizer.json").unlink()
    args = ["--model", str(model), "--set", "text_encoder_backend=jax"]
    _fails(tmp_path, capsys, args, f"{model / 'tokenizer'} has no tokenizer.json", "text_encoder_backend=torch")


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"d_model": 48}, "shared.weight is (98, 32), the config implies (98, 48)"),
        ({"num_layers": 1}, "more blocks than num_layers=1"),
        ({"num_layers": 3}, "encoder.block.2.layer.0.SelfAttention.q.weight is missing"),
        ({"d_kv": None}, "not a UMT5 encoder config"),
    ],
)
def test_a_text_encoder_config_that_does_not_fit_its_weights_is_refused(tmp_path, capsys, demo_cache, changes, expected):
    model = _demo_copy(demo_cache, tmp_path)
    _edit_json(model / "text_encoder" / "config.json", **changes)
    _fails(tmp_path, capsys, ["--model", str(model)], f"{model / 'text_encoder' / 'config.json'}", expected)


# First-last-frame-to-video and video-to-video: every refusal before loading, naming the fix.


def _frame(path, size=(8, 8)):
    import numpy as np
    from PIL import Image

    Image.fromarray(np.zeros((*size, 3), np.uint8)).save(path)
    return str(path)


def _frames_folder(folder, count):
    folder.mkdir()
    for i in range(count):
        _frame(folder / f"{i:03d}.png")
    return str(folder)


def test_a_last_frame_without_a_first(tmp_path, capsys):
    _fails(tmp_path, capsys, ["--last-image", _frame(tmp_path / "last.png")], "needs the first frame too")


def test_a_last_frame_for_an_i2v_model_without_the_flf2v_embedding(tmp_path, capsys, tiny_i2v_checkpoint):
    first, last = _frame(tmp_path / "first.png"), _frame(tmp_path / "last.png")
    _fails(
        tmp_path, capsys, ["--model", str(tiny_i2v_checkpoint), "--image", first, "--last-image", last],
        "reads one image", "wan2.1-flf2v-14b-720p",
    )  # fmt: skip


def test_a_video_for_an_image_to_video_model(tmp_path, capsys, tiny_i2v_checkpoint):
    video = _frames_folder(tmp_path / "frames", 17)
    args = ["--model", str(tiny_i2v_checkpoint), "--video", video, "--num-frames", "17"]
    _fails(tmp_path, capsys, args, "runs on a text-to-video model")


def test_a_video_with_an_image(tmp_path, capsys):
    video, image = _frames_folder(tmp_path / "frames", 17), _frame(tmp_path / "first.png")
    _fails(tmp_path, capsys, ["--video", video, "--image", image], "drop --image")


@pytest.mark.parametrize("strength", ["0", "1.5", "-0.2"])
def test_a_strength_outside_zero_to_one(tmp_path, capsys, strength):
    _fails(tmp_path, capsys, ["--video", _frames_folder(tmp_path / "frames", 17), "--strength", strength], "(0, 1]")


def test_a_strength_that_keeps_no_step(tmp_path, capsys):
    video = _frames_folder(tmp_path / "frames", 17)
    _fails(tmp_path, capsys, ["--video", video, "--steps", "8", "--strength", "0.1"], "int(8 * 0.1) = 0 steps")


def test_a_strength_without_a_video(tmp_path, capsys):
    _fails(tmp_path, capsys, ["--strength", "0.5"], "strength=0.5: a setting of the video-to-video mode", "or give --video")


def test_a_video_shorter_than_num_frames(tmp_path, capsys):
    video = _frames_folder(tmp_path / "frames", 5)
    _fails(tmp_path, capsys, ["--video", video, "--num-frames", "9"], "frames has 5 frame(s); num_frames=9")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda path: path.write_bytes(b"not a video"), "not a readable video file"),
        (lambda path: path.mkdir(), "without png/jpg frames"),
        (lambda path: None, "does not exist"),
    ],
    ids=["garbage", "empty-folder", "missing"],
)
def test_an_unreadable_video(tmp_path, capsys, make, message):
    source = tmp_path / "source.mp4"
    make(source)
    _fails(tmp_path, capsys, ["--video", str(source)], "source.mp4", message)


def test_frames_of_different_sizes(tmp_path, capsys):
    folder = tmp_path / "frames"
    _frames_folder(folder, 16)
    _frame(folder / "999.png", size=(8, 16))
    _fails(tmp_path, capsys, ["--video", str(folder)], "frames differ in size")
