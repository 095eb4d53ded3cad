"""`S2VSpec`: the released S2V-14B's config keys read, which audio injector runs after which block,
and the configs wanjax cannot run refused with the key that says why."""

from __future__ import annotations

import pytest

from wanjax.domain.errors import UnsupportedModelError
from wanjax.domain.s2v_spec import S2VSpec, s2v_parameters
from wanjax.domain.specs import TransformerSpec

RELEASE_LAYERS = [0, 4, 8, 12, 16, 20, 24, 27, 30, 33, 36, 39]
RELEASE = {  # wan/configs/wan_s2v_14B.py's transformer section, as its config.json holds it
    "dim": 5120, "num_heads": 40, "num_layers": 40, "cond_dim": 16, "audio_dim": 1024, "enable_adain": True,
    "adain_mode": "attn_norm", "audio_inject_layers": RELEASE_LAYERS, "zero_init": True, "zero_timestep": True,
    "enable_motioner": False, "add_last_motion": True, "trainable_token": False, "enable_tsm": False,
    "enable_framepack": True, "framepack_drop_mode": "padd", "motion_frames": 73,
}  # fmt: skip


def test_the_release_config_gives_one_injector_per_listed_block():
    spec = S2VSpec.from_config(RELEASE)
    assert spec.audio_inject_layers == tuple(RELEASE_LAYERS) and spec.num_audio_token == 4
    slots = spec.injector_of_block(40)
    assert [i for i, slot in enumerate(slots) if slot >= 0] == RELEASE_LAYERS
    assert [slot for slot in slots if slot >= 0] == list(range(12)) and spec.injector_count(40) == 12
    # The 14B's S2V additions; the formula is checked against the official model's tensors in
    # tests/parity/test_s2v_modules.py, this number against our branch's shapes (jax.eval_shape).
    assert s2v_parameters(TransformerSpec(), spec) == 2_007_264_025


@pytest.mark.parametrize(
    "change, key",
    [
        ({"enable_motioner": True, "enable_framepack": False}, "enable_motioner"),
        ({"enable_framepack": False}, "enable_framepack"),
        ({"cond_dim": 0}, "cond_dim"),
        ({"adain_mode": "norm"}, "adain_mode"),
        ({"framepack_drop_mode": "crop"}, "framepack_drop_mode"),
        ({"audio_inject_layers": [0, -1]}, "audio_inject_layers"),
    ],
)
def test_configs_wanjax_cannot_run_are_refused_by_their_key(change, key):
    with pytest.raises(UnsupportedModelError, match=key):
        S2VSpec.from_config({**RELEASE, **change})


def test_the_official_defaults_are_refused_for_their_motion_transformer():
    """WanModel_S2V's own defaults build the motion transformer (enable_motioner=True)."""
    with pytest.raises(UnsupportedModelError, match="enable_motioner=True"):
        S2VSpec.from_config({"cond_dim": 16})
