"""The published architecture table, the device peak table and the benchmark arithmetic.

Parameter counts of the table's transformers and VAEs against diffusers' own classes are in
test_transformer_real_configs.py and test_vae_real_configs.py."""

from __future__ import annotations

import pytest

from wanjax.application.presets import load_preset, preset_names
from wanjax.domain.architectures import ARCHITECTURES, published_architecture
from wanjax.domain.bench import BenchResult, DiffusersSteps, MemoryPeak, Peak
from wanjax.domain.devices import device_peak
from wanjax.domain.errors import UnsupportedModelError


@pytest.mark.parametrize("preset", [name for name in preset_names() if name != "demo"])
def test_every_preset_names_a_published_architecture(preset: str) -> None:
    config = load_preset(preset)
    architecture = published_architecture(config.model.location)
    two_experts = config.sampling.boundary_ratio is not None or config.sampling.expert_switch_step is not None
    assert (architecture.num_experts == 2) == two_experts


@pytest.mark.parametrize("repo", list(ARCHITECTURES))
def test_image_inputs_fit_the_transformer(repo: str) -> None:
    """I2V transformers take the mask and first-frame latents as extra channels; Wan 2.1's also CLIP tokens."""
    a = ARCHITECTURES[repo]
    assert a.extra_channels in (0, a.vae.z_dim + a.vae.temporal_compression)
    assert (a.image_tokens > 0) == a.transformer.uses_image_embeddings
    assert (a.boundary_ratio is not None) == (a.num_experts == 2)


def test_unknown_repo_names_the_known_ones() -> None:
    with pytest.raises(UnsupportedModelError, match="Wan-AI/Wan2.1-T2V-1.3B-Diffusers"):
        published_architecture("someone/else")


@pytest.mark.parametrize(
    "kind, dtype, flops",
    [
        ("NVIDIA H100 80GB HBM3", "bfloat16", 989e12),
        ("NVIDIA H100 80GB HBM3", "float32", 494.5e12),
        ("NVIDIA H100 PCIe", "bfloat16", 756e12),
        ("NVIDIA H200", "bfloat16", 989e12),
        ("TPU v5 lite", "bfloat16", 197e12),
        ("TPU v5", "bfloat16", 459e12),
        ("TPU v6 lite", "bfloat16", 918e12),
        ("TPU7x", "bfloat16", 2307e12 / 2),
    ],
)
def test_device_peaks_by_kind(kind: str, dtype: str, flops: float) -> None:
    assert device_peak(kind).flops(dtype) == flops


@pytest.mark.parametrize("kind", ["cpu", "NVIDIA GeForce RTX 4090"])
def test_unlisted_devices_have_no_peak(kind: str) -> None:
    assert device_peak(kind) is None


def test_mfu_and_json() -> None:
    result = BenchResult(
        device="gpu: x", model="demo", layers=2, shape={"height": 16}, dtype="bfloat16", weights_dtype="bfloat16", attention="xla", steps=3,
        seconds_per_step=0.5, flops_per_step=10**12, peak=Peak(flops=4e12, source="datasheet"),
        memory=MemoryPeak(bytes=2**30, source="device"), run_memory=MemoryPeak(bytes=2**31, source="device"), planned_memory_bytes=2**29, compile_seconds=1.0,
        diffusers=DiffusersSteps(seconds_per_step=2.0, attention="native: flash"),
        diffusers_compiled=DiffusersSteps(seconds_per_step=0.75, attention="native: flash", compile_seconds=60.0, compiled_with="inductor"),
        diffusers_device="cuda",
    )  # fmt: skip
    assert result.mfu == pytest.approx(0.5)
    assert result.speedup_over_diffusers == pytest.approx(4.0)
    assert result.speedup_over_compiled_diffusers == pytest.approx(1.5)
    record = result.as_json()
    assert record["mfu"] == pytest.approx(0.5) and record["peak_memory_bytes"] == 2**30
    assert record["planned_peak_memory_bytes"] == 2**29
    assert record["diffusers_seconds_per_step"] == 2.0 and record["diffusers_attention"] == "native: flash"
    assert record["diffusers_compiled_seconds_per_step"] == 0.75 and record["diffusers_compile_seconds"] == 60.0
    assert record["speedup_over_compiled_diffusers"] == pytest.approx(1.5)
    assert record["diffusers_compiled_with"] == "inductor"
    assert "vae_seconds" not in record and record["run_peak_memory_bytes"] == 2**31


def test_json_with_the_vae_beside_diffusers() -> None:
    result = BenchResult(
        device="cpu: 2 cores", model="demo", layers=2, shape={"height": 16}, dtype="float32", weights_dtype="float32",
        attention="xla", steps=1, seconds_per_step=0.5, flops_per_step=10**12, peak=Peak(flops=4e12, source="measured"),
        memory=MemoryPeak(bytes=2**30, source="rss"), run_memory=MemoryPeak(bytes=3 * 2**30, source="rss"),
        planned_memory_bytes=2**31, compile_seconds=1.0, vae_seconds=2.0, vae_compile_seconds=3.0,
        vae_memory=MemoryPeak(bytes=2**31, source="VmHWM"), diffusers_vae_seconds=(3.0, 4.0),
    )  # fmt: skip
    record = result.as_json()
    assert record["vae_peak_memory_bytes"] == 2**31 and record["run_peak_memory_bytes"] == 3 * 2**30
    assert record["diffusers_vae_seconds"] == 3.0 and record["diffusers_vae_tiled_seconds"] == 4.0
    assert record["vae_speedup_over_diffusers"] == pytest.approx(1.5)
