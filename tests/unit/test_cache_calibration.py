"""MagCache calibration: recorded residual norms -> the curve, and the preset fragment that feeds
it back into a config unchanged."""

import numpy as np
import pytest
import yaml

from wanjax.domain.caching.calibration import calibrate_curve
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import InvalidRequestError


def test_ratio_is_the_token_mean_of_consecutive_norm_ratios():
    tokens = np.array([1.0, 2.0, 4.0])  # [T]
    cond = np.stack([tokens * 0.9**i for i in range(4)])  # [S, T]: shrinks 10% per step
    uncond = np.stack([tokens * 1.1**i for i in range(4)])
    curve = calibrate_curve(np.stack([cond, uncond], axis=1), np.zeros(4, np.int32))  # norms [S, 2, T]
    assert curve.mag_ratios == (1.0, 1.0, *(0.9, 1.1) * 3)  # 5 decimals, first step padded with 1.0
    assert curve.mag_ratios_split is None


def test_one_pass_fills_both_halves_and_two_experts_give_the_split():
    norms = np.ones((5, 1, 2))  # [S, 1, T]: no guidance
    norms[3:] = 0.5
    curve = calibrate_curve(norms, np.array([0, 0, 0, 1, 1]))
    assert curve.mag_ratios == (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 1.0, 1.0)
    assert curve.mag_ratios_split == 3


def test_fragment_feeds_the_same_curve_back_into_a_config():
    norms = np.abs(np.random.default_rng(0).normal(size=(6, 2, 4))) + 0.1
    curve = calibrate_curve(norms, np.array([0, 0, 0, 1, 1, 1]))
    fragment = curve.preset_fragment("wan2.2-t2v-a14b, bfloat16, 6 steps")
    assert fragment.startswith("# MagCache curve measured by magcache_calibration: wan2.2-t2v-a14b")
    settings = GenerationConfig.from_mapping(yaml.safe_load(fragment)).cache
    assert settings.mag_ratios == curve.mag_ratios and settings.mag_ratios_split == 3


def test_norms_of_the_wrong_shape_are_refused():
    with pytest.raises(InvalidRequestError, match=r"expected \[S, P, T\]"):
        calibrate_curve(np.ones((4, 3, 2)), np.zeros(4, np.int32))
    with pytest.raises(InvalidRequestError, match="S = 5 steps"):
        calibrate_curve(np.ones((4, 2, 2)), np.zeros(5, np.int32))
