"""The memory plan's arithmetic: exact parameter counts, and each setting that should lower an
estimate lowers the part it names."""

import attrs
import pytest

from wanjax.domain import architectures
from wanjax.domain.architectures import WAV2VEC2_LARGE_PARAMETERS
from wanjax.domain.memory import (
    GIB,
    Workload,
    advice,
    plan_memory,
    transformer_parameters,
)
from wanjax.domain.specs import VaeSpec
from wanjax.domain.vae_memory import (
    VAE_DECODE_CACHE_MULTIPLES,
    VAE_DECODE_RESIDENT,
    VAE_TILE_OUTPUTS,
    VAE_TILED_MULTIPLES,
)

WAN13_480P81 = Workload(  # Wan 2.1 1.3B at 832x480x81 with guidance, fp32
    transformer=architectures.WAN21_T2V_1_3B, rows=2, tokens=21 * 30 * 52, text_tokens=512,
    weights_dtype="float32", activations_dtype="float32", attention="blockwise",
    vae=VaeSpec(), vae_parameters=127_000_000, latent_frames=21, pixels=480 * 832,
)  # fmt: skip


def _parts(work: Workload, platform: str = "cpu") -> dict[str, int]:
    return dict(plan_memory(work, platform=platform, available=None).parts)


@pytest.mark.parametrize("name", ["WAN21_T2V_1_3B", "WAN21_I2V_14B", "WAN22_TI2V_5B"])
def test_the_blocks_matmul_kernels_are_nearly_every_parameter(name):
    """(The total equals diffusers' count: tests/unit/test_transformer_real_configs.py.)"""
    total, kernels = transformer_parameters(getattr(architectures, name))
    assert 0.95 * total < kernels < total


def test_the_logit_matrix_is_what_xla_attention_costs():
    without_vae = attrs.evolve(WAN13_480P81, vae=None)  # on CPU the decode's transient is the larger
    blockwise = _parts(without_vae)["denoising step activations"]
    xla = _parts(attrs.evolve(without_vae, attention="xla"))["denoising step activations"]
    logits = 3 * 2 * 12 * 32760**2 * 4  # three [rows, heads, T, S] fp32 copies
    assert xla - blockwise == pytest.approx(logits - 3 * 2 * 12 * 1024 * 512 * 4)
    assert blockwise < 8 * GIB < 100 * GIB < xla  # the issue's ~100 GiB of logits, gone


def test_fp8_weights_store_the_block_kernels_in_one_byte():
    bf16 = attrs.evolve(WAN13_480P81, weights_dtype="bfloat16", activations_dtype="bfloat16")
    fp8 = attrs.evolve(bf16, weights_dtype="float8_e4m3fn")
    total, kernels = transformer_parameters(WAN13_480P81.transformer)
    assert _parts(bf16)["transformer weights"] - _parts(fp8)["transformer weights"] == kernels


def test_a_mesh_divides_weights_rows_and_tokens():
    one = _parts(WAN13_480P81, "gpu")
    mesh = _parts(attrs.evolve(WAN13_480P81, weight_shards=4, row_shards=2, token_shards=4, devices=8), "gpu")
    assert mesh["transformer weights"] == one["transformer weights"] // 4
    without_vae = attrs.evolve(WAN13_480P81, vae=None)
    step = _parts(without_vae, "gpu")["denoising step activations"]
    sharded_step = _parts(attrs.evolve(without_vae, row_shards=2, token_shards=4), "gpu")["denoising step activations"]
    assert sharded_step < step / 7
    decode = _parts(attrs.evolve(WAN13_480P81, rows=1, tokens=16), "gpu")["VAE decode activations"]
    sharded_decode = _parts(attrs.evolve(WAN13_480P81, rows=1, tokens=16, devices=8), "gpu")["VAE decode activations"]
    assert sharded_decode == pytest.approx(decode / 8, rel=1e-6)  # frames split spatially over every device


def test_two_experts_hold_twice_the_weights():
    a14b = attrs.evolve(WAN13_480P81, num_experts=2)
    assert _parts(a14b)["transformer weights"] == 2 * _parts(WAN13_480P81)["transformer weights"]


def test_request_loras_count_a_merged_copy_and_their_cache():
    plain = _parts(WAN13_480P81)
    assert not any(name.startswith("request LoRAs") for name in plain)
    switching = attrs.evolve(WAN13_480P81, num_experts=2, request_lora_cache=512 * 2**20)
    parts = _parts(switching)
    assert parts["request LoRAs: merged copy, factor cache"] == parts["transformer weights"] + 512 * 2**20
    plan = plan_memory(switching, platform="cpu", available=GIB)
    assert any("per request" in option for option in advice(plan, switching))


def test_vae_tiling_and_chunks_bound_the_decode():
    at_720p = attrs.evolve(WAN13_480P81, pixels=1280 * 720, attention="blockwise", rows=1, tokens=16)
    untiled = _parts(at_720p)["VAE decode activations"]
    tiled = _parts(attrs.evolve(at_720p, vae_tile=256))["VAE decode activations"]
    unrolled = _parts(attrs.evolve(at_720p, vae_decode_chunk=None))["VAE decode activations"]
    untiled_3d = _parts(attrs.evolve(at_720p, vae_convolution="3d"))["VAE decode activations"]
    tiled_3d = _parts(attrs.evolve(at_720p, vae_tile=256, vae_convolution="3d"))["VAE decode activations"]
    # One tile's plan (in its form) by the form's multiple, plus every tile's output: twice the 81-frame video.
    outputs = VAE_DECODE_RESIDENT * VAE_TILE_OUTPUTS * 3 * 1280 * 720 * 81 * 4
    one_tile, one_tile_3d = (plan * 256**2 / (1280 * 720) for plan in (untiled, untiled_3d))
    assert tiled == pytest.approx(VAE_TILED_MULTIPLES["frames"] * one_tile + outputs, rel=1e-6)
    assert tiled_3d == pytest.approx(VAE_TILED_MULTIPLES["3d"] * one_tile_3d + outputs, rel=1e-6)
    assert tiled_3d < tiled < untiled / 3
    assert unrolled > 7 * untiled  # all 21 latent frames' activations in one program


def test_the_decode_plans_the_caches_at_832x480_and_encoding_a_video_counts():
    decode = _parts(attrs.evolve(WAN13_480P81, rows=1, tokens=16))["VAE decode activations"]
    multiple = VAE_DECODE_RESIDENT * sum(VAE_DECODE_CACHE_MULTIPLES["frames"])  # chunk 1
    assert 3 * GIB < decode / multiple < 4 * GIB  # the Wan 2.1 decoder's caches: 3.5 GiB at 832x480
    encoding = attrs.evolve(WAN13_480P81, rows=1, tokens=16, vae_encode_frames=81)
    unrolled = _parts(attrs.evolve(encoding, vae_encode_chunk=None))
    assert "VAE encode activations" in unrolled and "VAE decode activations" not in unrolled
    assert unrolled["VAE encode activations"] > 3 * _parts(encoding).get("VAE encode activations", decode)


def test_the_text_encoder_counts_only_where_it_shares_the_memory():
    work = attrs.evolve(WAN13_480P81, text_encoder_parameters=5_700_000_000, text_encoder_dtype="bfloat16")
    assert _parts(work, "cpu")["text encoder weights"] == 11_400_000_000
    assert "text encoder weights" not in _parts(work, "gpu")  # torch holds it in host memory there
    assert "text encoder runtime (torch)" in _parts(work, "cpu")
    on_device = attrs.evolve(work, text_encoder_backend="jax")  # the JAX encoder: on the device, no torch
    assert _parts(on_device, "gpu")["text encoder weights"] == _parts(on_device, "cpu")["text encoder weights"]
    assert "text encoder runtime (torch)" not in _parts(on_device, "cpu")


def test_a_scaled_fp8_text_encoder_counts_its_fp8_values_at_one_byte_on_the_jax_encoder():
    work = attrs.evolve(WAN13_480P81, text_encoder_parameters=5_700_000_000, text_encoder_dtype="bfloat16",
                        text_encoder_fp8_parameters=5_600_000_000)  # fmt: skip
    on_device = attrs.evolve(work, text_encoder_backend="jax")
    assert _parts(on_device, "gpu")["text encoder weights"] == 5_600_000_000 + 2 * 100_000_000
    assert _parts(work, "cpu")["text encoder weights"] == 11_400_000_000  # torch dequantizes it on load


def test_a_plan_that_does_not_fit_names_the_fixes():
    work = attrs.evolve(WAN13_480P81, attention="xla")
    plan = plan_memory(work, platform="gpu", available=80 * GIB)
    assert not plan.fits
    assert "estimated peak" in plan.summary() and "available" in plan.summary()
    fixes = advice(plan, work)
    assert fixes[0].startswith("--set attention=auto")
    assert any("mesh" in fix for fix in fixes)


def test_the_speech_encoder_waits_in_host_memory_in_its_dtype():
    """Wan 2.2 S2V's wav2vec2 runs in torch on the CPU: host memory on a GPU, the one memory on a CPU."""
    s2v = attrs.evolve(
        WAN13_480P81, speech_encoder_parameters=WAV2VEC2_LARGE_PARAMETERS, speech_encoder_dtype="bfloat16"
    )
    for platform in ("cpu", "gpu"):
        plain, plan = (plan_memory(work, platform=platform, available=None) for work in (WAN13_480P81, s2v))
        assert dict(plan.host_parts)["speech encoder weights (torch)"] == 2 * WAV2VEC2_LARGE_PARAMETERS
        assert plan.peak - plain.peak == (2 * WAV2VEC2_LARGE_PARAMETERS if platform == "cpu" else 0)


def test_the_published_speech_encoder_count_is_transformers_wav2vec2_large():
    """wav2vec2-large-xlsr-53's config (transformers' defaults for the conv stack) built on torch's meta
    device: nothing allocated."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, conv_bias=True,
        feat_extract_norm="layer", do_stable_layer_norm=True, num_conv_pos_embeddings=128,
        num_conv_pos_embedding_groups=16, mask_time_prob=0.05,
    )  # fmt: skip
    with torch.device("meta"):
        model = Wav2Vec2Model(config)
    assert sum(p.numel() for p in model.parameters()) == WAV2VEC2_LARGE_PARAMETERS
