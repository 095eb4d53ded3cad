"""`wanjax generate` end to end on the built-in demo model."""

import hashlib
import json

import av
import numpy as np
import pytest

from wanjax.entrypoints.cli import main

SMALL = ["--height", "32", "--width", "48", "--num-frames", "5", "--steps", "2"]


@pytest.fixture(autouse=True)
def demo_in_session_cache(demo_cache, monkeypatch):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))


def _decoded(path):
    """The decoded YUV planes as stored: converting to RGB would go through FFmpeg's threaded
    colour converter, whose output varies from run to run."""
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray() for f in container.decode(video=0)])


def _md5(path):
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_generates_an_mp4_byte_identical_for_the_same_seed(tmp_path, capsys):
    first, second = tmp_path / "a.mp4", tmp_path / "b.mp4"
    assert main(["generate", "--prompt", "a fox", *SMALL, "--seed", "3", "--out", str(first)]) == 0
    summary = capsys.readouterr().out
    assert "TIMING SUMMARY" in summary
    for phase in ("Load", "Compile", "Conditioning", "Denoise", "Vae Decode"):
        assert phase in summary
    assert main(["generate", "--prompt", "a fox", *SMALL, "--seed", "3", "--quiet", "--out", str(second)]) == 0
    np.testing.assert_array_equal(_decoded(first), _decoded(second))  # the pictures, then the bytes
    assert _md5(first) == _md5(second)
    frames = _decoded(first)
    assert frames.shape == (5, 32 * 3 // 2, 48)  # 5 frames of yuv420p planes, 32 x 48 pixels
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mp4", "b.mp4"]  # no temporary left


def test_npy_frames_and_seed_changes_the_video(tmp_path):
    a, b, timings = tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "timings.json"
    main(["generate", "--prompt", "a fox", *SMALL, "--seed", "1", "--quiet", "--out", str(a), "--timings", str(timings)])
    main(["generate", "--prompt", "a fox", *SMALL, "--seed", "2", "--quiet", "--out", str(b)])
    frames_a, frames_b = np.load(a), np.load(b)
    assert frames_a.shape == (1, 5, 32, 48, 3) and frames_a.dtype == np.uint8
    assert not np.array_equal(frames_a, frames_b)

    report = json.loads(timings.read_text())  # --timings: the summary's phases, the steps, the memory
    assert set(report["seconds"]) == {"load", "conditioning", "compile", "denoise", "vae_decode", "write"}
    assert all(seconds > 0 for seconds in report["seconds"].values())
    assert len(report["step_seconds"]) == 1 and report["step_seconds"][0] > 0  # 2 steps: one interval
    assert report["steps"] == {"total": 2, "computed": 2, "skipped": 0}
    memory = report["memory"]
    assert memory["offload"] == "none" and memory["peak_bytes"] > 0 and memory["planned_peak_bytes"] > 0


def test_a_timings_file_in_a_missing_folder_is_refused_before_loading(tmp_path, capsys):
    out, timings = tmp_path / "a.npy", tmp_path / "missing" / "timings.json"
    assert main(["generate", "--prompt", "a fox", *SMALL, "--out", str(out), "--timings", str(timings)]) == 2
    assert "--timings" in capsys.readouterr().err and not out.exists()


def test_given_latents_replace_the_seed_and_latent_output_uses_diffusers_layout(tmp_path):
    noise = np.random.default_rng(0).standard_normal((1, 16, 2, 4, 6)).astype(np.float32)
    np.save(tmp_path / "noise.npy", noise)
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"latents-{seed}.npy"
        args = ["generate", "--prompt", "a fox", *SMALL, "--seed", seed, "--quiet"]
        assert main([*args, "--latents", str(tmp_path / "noise.npy"), "--output-type", "latent", "--out", str(out)]) == 0
        outs.append(np.load(out))
    assert outs[0].shape == (1, 16, 2, 4, 6)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.allclose(outs[0], noise)


def test_presets_are_listed(capsys):
    assert main(["presets"]) == 0
    assert "wan2.1-t2v-14b" in capsys.readouterr().out


def test_plan_says_where_each_sampling_value_came_from(tmp_path, capsys):
    assert main(["plan", "--prompt", "a fox", *SMALL, "--set", "flow_shift=4"]) == 0
    settings = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert settings["flow_shift"].split()[1] == "4.0" and settings["flow_shift"].endswith("(--set)")
    assert settings["guidance_scale"].endswith("(preset 'demo')")
    assert "scheduler_config.json" in settings["sample_solver"]  # the demo checkpoint's scheduler
