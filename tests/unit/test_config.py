"""Config keys: unknown keys and malformed values are clear errors; strings parse to the key's type."""

import pytest

from wanjax.application.presets import load_preset, preset_names, resolve_config
from wanjax.domain.caching.magcache import magcache_curve
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError


def test_overrides_parse_to_the_key_type():
    config = GenerationConfig().with_overrides(
        {"scan_layers": "false", "num_frames": "17", "guidance_scale": "4.5", "dtype": "bfloat16"}
    )
    assert config.denoiser.scan_layers is False
    assert config.sampling.num_frames == 17
    assert config.sampling.guidance_scale == 4.5
    assert config.model.dtype == "bfloat16"


def test_unknown_key_names_the_key_and_a_close_match():
    with pytest.raises(ConfigError, match="unknown config key 'guidence_scale'.*Did you mean 'guidance_scale'"):
        GenerationConfig().with_overrides({"guidence_scale": "3"})


@pytest.mark.parametrize(
    "key, value",
    [("num_frames", "seventeen"), ("scan_layers", "maybe"), ("guidance_scale", "x"), ("num_frames", "1.5")],
)
def test_malformed_value_is_refused(key, value):
    with pytest.raises(ConfigError, match=key):
        GenerationConfig().with_overrides({key: value})


@pytest.mark.parametrize(
    "key, value", [("dtype", "float16"), ("attention", "flash"), ("sample_solver", "ddim"), ("sigma_schedule", "karras")]
)
def test_out_of_set_value_lists_the_allowed(key, value):
    with pytest.raises(ConfigError, match="must be one of"):
        GenerationConfig().with_overrides({key: value})


def test_sampler_defaults_to_unipc_on_the_official_grid():
    config = GenerationConfig()
    assert (config.sampling.sample_solver, config.sampling.sigma_schedule) == ("unipc", "official")
    assert config.request("a cat").sigma_schedule == "official"
    assert GenerationConfig().with_overrides({"sigma_schedule": "diffusers"}).request("a cat").sigma_schedule == "diffusers"


def test_dpm_on_the_diffusers_grid_fails_at_config_time():
    with pytest.raises(ConfigError, match="sample_solver=dpm\\+\\+ with sigma_schedule=diffusers"):
        GenerationConfig().with_overrides({"sample_solver": "dpm++", "sigma_schedule": "diffusers"})


def test_every_preset_loads_and_makes_a_valid_request():
    assert {"demo", "wan2.1-t2v-1.3b", "wan2.1-t2v-14b"} <= set(preset_names())
    for name in preset_names():
        load_preset(name).request("a prompt")


def test_model_argument_is_a_preset_or_a_checkpoint():
    assert resolve_config(None, read_checkpoint=False).model.location == "demo"
    assert resolve_config("wan2.1-t2v-14b", read_checkpoint=False).model.location == "Wan-AI/Wan2.1-T2V-14B-Diffusers"
    assert resolve_config("/some/folder", read_checkpoint=False).model.location == "/some/folder"


def test_unknown_preset_lists_the_known():
    with pytest.raises(ConfigError, match="known presets: demo"):
        load_preset("wan9")


def test_aliases_from_diffusers_and_maxdiffusion_names():
    config = GenerationConfig().with_overrides({"guidance_scale_2": "3.5", "guidance_scale_high": "4"})
    assert (config.sampling.guidance_scale, config.sampling.guidance_scale_low) == (4.0, 3.5)
    with pytest.raises(ConfigError, match="second time"):
        GenerationConfig().with_overrides({"guidance_scale_2": "3", "guidance_scale_low": "2"})


def test_optional_keys_accept_none():
    config = GenerationConfig.from_mapping(dict(boundary_ratio=0.9)).with_overrides({"boundary_ratio": "none"})
    assert config.sampling.boundary_ratio is None


def test_cache_keys_parse_and_reach_the_request():
    config = GenerationConfig().with_overrides(
        {"cache_policy": "magcache", "mag_ratios_base": "1, 1, 0.99, 0.98", "magcache_K": "3"}
    )
    cache = config.request("a prompt").cache
    assert (cache.policy, cache.mag_ratios, cache.magcache_K) == ("magcache", (1.0, 1.0, 0.99, 0.98), 3)


def test_maxdiffusion_cache_switches_point_to_cache_policy():
    with pytest.raises(ConfigError, match="use_sen_cache.*cache_policy=sencache"):
        GenerationConfig().with_overrides({"use_sen_cache": "true"})


def test_cache_conflicts_are_config_errors():
    with pytest.raises(ConfigError, match="cache_policy"):
        GenerationConfig().with_overrides({"cache_policy": "deepcache"})
    with pytest.raises(ConfigError, match="magcache_calibration"):
        GenerationConfig().with_overrides({"cache_policy": "cfg_cache", "magcache_calibration": "true"})


UNCALIBRATED_PRESETS = (
    "wan2.1-flf2v-14b-720p", "wan2.2-animate-14b", "wan2.2-s2v-14b",
    "skyreels-v2-df-1.3b-540p", "skyreels-v2-df-14b-540p", "skyreels-v2-df-14b-720p",
)  # fmt: skip
"""Presets of models with no published MagCache curve: magcache needs the user's own (a calibration run;
a SkyReels-V2 DF request refuses every step cache)."""


@pytest.mark.parametrize("policy", ["magcache", "cfg_cache", "sencache"])
def test_every_cache_preset_turns_each_policy_on_with_one_key(policy):
    for name in preset_names():
        config = load_preset(name)
        if config.sampling.sample_timesteps is not None:  # the few-step distilled presets: no cache section
            continue
        if policy == "magcache" and name in UNCALIBRATED_PRESETS:
            with pytest.raises(ConfigError, match="mag_ratios"):
                config.with_overrides({"cache_policy": policy})
            continue
        settings = config.with_overrides({"cache_policy": policy}).cache
        assert settings.policy == policy and config.cache.policy == "none"
        if policy == "magcache":
            assert magcache_curve(settings.section("magcache"), settings.published)[0] is not None  # published
