"""LoRA specs as users write them (`PATH[:SCALE]`, config keys) and which expert gets which."""

import pytest

from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.lora import MAX_LORA_SCALE, MAX_LORAS_PER_EXPERT, MAX_REQUEST_LORAS, LoraSpec, lora_spec, loras_per_expert


def test_config_keys_take_lists_or_comma_separated_text():
    config = GenerationConfig().with_overrides({"loras": "a.safetensors:0.5,b.safetensors"})
    assert config.denoiser.loras == ("a.safetensors:0.5", "b.safetensors")
    assert GenerationConfig.from_mapping({"loras_low": ["c.safetensors"]}).denoiser.loras_low == ("c.safetensors",)


@pytest.mark.parametrize(
    "text, spec",
    [("a.safetensors", LoraSpec("a.safetensors")), ("a.safetensors:0.5", LoraSpec("a.safetensors", 0.5)),
     ("/x/y:z/b.safetensors:-1", LoraSpec("/x/y:z/b.safetensors", -1.0)),
     ("C:\\loras\\a.safetensors", LoraSpec("C:\\loras\\a.safetensors"))],
)  # fmt: skip
def test_lora_spec_parsing(text, spec):
    assert LoraSpec.parse(text) == spec


@pytest.mark.parametrize("text", ["a.safetensors:x", "a.bin", "a.safetensors:nan"])
def test_bad_lora_specs_are_refused(text):
    with pytest.raises(ConfigError, match="loras: LoRA"):
        GenerationConfig.from_mapping(dict(loras=(text,)))


def test_low_noise_loras_need_two_experts():
    assert loras_per_expert(2, ["a.safetensors"], ["b.safetensors:2"]) == (
        (LoraSpec("a.safetensors"),), (LoraSpec("b.safetensors", 2.0),)
    )
    with pytest.raises(ConfigError, match="this model has one transformer"):
        loras_per_expert(1, [], ["b.safetensors"])


def test_a_request_takes_specs_text_or_records_and_names_its_field_when_wrong():
    config = GenerationConfig()
    request = config.request("a fox", loras=["a.safetensors:0.5", {"path": "b.safetensors", "scale": 2}],
                             loras_low=[LoraSpec("c.safetensors")])  # fmt: skip
    assert request.loras == (LoraSpec("a.safetensors", 0.5), LoraSpec("b.safetensors", 2.0))
    assert request.loras_low == (LoraSpec("c.safetensors"),)
    for fields, message in [(dict(loras="a.safetensors"), "loras='a.safetensors': must be a list"),
                            (dict(loras_low=[LoraSpec("c.safetensors", float("inf"))]), "loras_low: LoRA .* finite"),
                            (dict(loras=[{"path": ""}]), "loras: LoRA .* non-empty")]:  # fmt: skip
        with pytest.raises(InvalidRequestError, match=message):
            config.request("a fox", **fields)


def test_request_loras_and_offloaded_blocks_exclude_each_other():
    with pytest.raises(ConfigError, match="request_loras .* offload=layers"):
        GenerationConfig.from_mapping({"request_loras": True, "offload": "layers"})


def test_a_requests_loras_are_bounded_per_expert_and_together():
    config = GenerationConfig()
    eight = ["a.safetensors"] * MAX_LORAS_PER_EXPERT
    assert len(config.request("a fox", loras=eight).loras) == MAX_LORAS_PER_EXPERT
    with pytest.raises(InvalidRequestError, match=f"loras: {MAX_LORAS_PER_EXPERT + 1} LoRAs; a request applies at most 8 per expert"):
        config.request("a fox", loras=[*eight, "b.safetensors"])
    with pytest.raises(InvalidRequestError, match=f"loras and loras_low: 13 LoRAs together; a request applies at most {MAX_REQUEST_LORAS}"):
        config.request("a fox", loras=eight, loras_low=["c.safetensors"] * 5)


@pytest.mark.parametrize("scale, span", [(100.5, f" from -{MAX_LORA_SCALE:g} to {MAX_LORA_SCALE:g}"),
                                         (-101, f" from -{MAX_LORA_SCALE:g} to {MAX_LORA_SCALE:g}"),
                                         (10**400, ""), (float("inf"), "")])  # fmt: skip
def test_a_request_scale_past_the_documented_range_is_refused(scale, span):
    with pytest.raises(InvalidRequestError, match=f"loras: LoRA .*: the scale must be a finite number{span}, e.g. 0.8"):
        GenerationConfig().request("a fox", loras=[LoraSpec("a.safetensors", scale)])
    assert GenerationConfig().request("a fox", loras=[LoraSpec("a.safetensors", -MAX_LORA_SCALE)]).loras[0].scale == -MAX_LORA_SCALE


def test_the_configs_own_loras_take_any_finite_scale_as_diffusers_does():
    assert lora_spec("a.safetensors:150").scale == 150.0
    assert GenerationConfig.from_mapping(dict(loras=("a.safetensors:-250",))).denoiser.loras == ("a.safetensors:-250",)
    for scale in (10**400, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="the scale must be a finite number, e.g. 0.8"):
            lora_spec(LoraSpec("a.safetensors", scale))


def test_a_path_with_a_nul_byte_is_refused():
    with pytest.raises(ConfigError, match="control character"):
        lora_spec("a\x00b.safetensors")
