"""Spec defaults and config reading agree with diffusers' Wan model configs."""

import inspect

import pytest

from wanjax.domain.errors import CheckpointError, UnsupportedModelError
from wanjax.domain.specs import TransformerSpec, VaeSpec


def _defaults(cls):
    return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items() if k != "self"}


def test_vae_defaults_are_diffusers_wan21_defaults():
    from diffusers import AutoencoderKLWan

    reference = _defaults(AutoencoderKLWan)
    spec = VaeSpec()
    for field in ("base_dim", "z_dim", "num_res_blocks", "latents_mean", "latents_std", "dim_mult", "temperal_downsample"):
        assert list(getattr(spec, field)) == list(reference[field]) if isinstance(reference[field], list) else getattr(spec, field) == reference[field], field


def test_transformer_reads_a_diffusers_config_and_ignores_bookkeeping_keys():
    spec = TransformerSpec.from_diffusers_config(
        {"_class_name": "WanTransformer3DModel", "_diffusers_version": "0.35.0", "num_layers": 30,
         "num_attention_heads": 12, "ffn_dim": 8960, "patch_size": [1, 2, 2], "image_dim": None}
    )  # fmt: skip
    assert (spec.num_layers, spec.inner_dim, spec.patch_size) == (30, 1536, (1, 2, 2))


def test_i2v_transformer_config_is_read():
    spec = TransformerSpec.from_diffusers_config({"image_dim": 1280, "added_kv_proj_dim": 5120, "in_channels": 36})
    assert spec.uses_image_embeddings and spec.in_channels == 36


def test_vace_config_without_its_vace_keys_gets_diffusers_defaults():
    from diffusers import WanVACETransformer3DModel

    reference = _defaults(WanVACETransformer3DModel)
    spec = TransformerSpec.from_diffusers_config({"_class_name": "WanVACETransformer3DModel", "num_layers": 40})
    assert spec.is_vace
    assert (list(spec.vace_layers), spec.vace_in_channels) == (reference["vace_layers"], reference["vace_in_channels"])
    assert not TransformerSpec.from_diffusers_config({"_class_name": "WanTransformer3DModel"}).is_vace


@pytest.mark.parametrize(
    "config, message",
    [
        ({"vace_layers": [0, 2]}, "vace_in_channels=None"),
        ({"vace_in_channels": 96}, "vace_layers=None"),
        ({"vace_layers": [2, 4], "vace_in_channels": 96}, r"ascending block indices from 0"),
        ({"vace_layers": [0, 4, 2], "vace_in_channels": 96}, r"ascending block indices from 0"),
        ({"vace_layers": [0, 30], "vace_in_channels": 96, "num_layers": 30}, r"below num_layers=30"),
    ],
)
def test_bad_vace_configs_are_named(config, message):
    with pytest.raises((UnsupportedModelError, CheckpointError), match=message):
        TransformerSpec.from_diffusers_config(config)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"image_dim": 1280}, "image_dim"),
        ({"added_kv_proj_dim": 5120}, "added_kv_proj_dim"),
        ({"image_dim": 1280, "added_kv_proj_dim": 64}, "added_kv_proj_dim"),
        ({"pos_embed_seq_len": 514}, "pos_embed_seq_len"),
        ({"qk_norm": "layer_norm"}, "qk_norm"),
    ],
)
def test_unsupported_transformer_variants_are_named(config, message):
    with pytest.raises(UnsupportedModelError, match=message):
        TransformerSpec.from_diffusers_config(config)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"is_residual": True, "z_dim": 48}, "z_dim=48"),
        ({"z_dim": 4}, "z_dim=4"),
        ({"attn_scales": [0.5]}, "attn_scales"),
    ],
)
def test_unsupported_vae_variants_are_named(config, message):
    with pytest.raises(UnsupportedModelError, match=message):
        VaeSpec.from_diffusers_config(config)
