"""The mesh shape from config, and its clear errors when it does not fit the devices, the heads,
the tokens or the rows: raised before any weight loads."""

from __future__ import annotations

import pytest

from wanjax.application.container import build_container
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.sharding import DEFAULT_RULES, MeshShape, logical_rules


def test_config_keys_give_the_mesh_shape_and_default_to_one_device() -> None:
    assert GenerationConfig().mesh.shape.is_single_device
    config = GenerationConfig().with_overrides({"mesh_fsdp": "2", "mesh_tensor": "4"})
    assert config.mesh.shape.sizes == (1, 2, 4, 1)


@pytest.mark.parametrize(
    "override, message",
    [
        ({"mesh_context": "0"}, "mesh_context=0: must be >= 1"),
        ({"context_parallel": "allgather"}, "context_parallel='allgather': must be one of ulysses, ring"),
        ({"logical_axis_rules": "embeding=fsdp"}, "'embeding=fsdp' must be LOGICAL=AXIS"),
        ({"logical_axis_rules": "mlp=tensor+tensor"}, "use distinct axes from data, fsdp, tensor, context"),
    ],
)
def test_bad_sharding_keys_are_named(override: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        GenerationConfig().with_overrides(override)


def test_rule_overrides_replace_only_their_entries() -> None:
    rules = dict(logical_rules(["embed=", "mlp=tensor+fsdp"]))
    assert rules["embed"] == () and rules["mlp"] == ("tensor", "fsdp")
    assert rules["heads"] == dict(DEFAULT_RULES)["heads"] == ("tensor",)


def test_mesh_must_use_every_device() -> None:
    with pytest.raises(ConfigError, match=r"data=2 x fsdp=1 x tensor=2 x context=1 = 4 devices, but 8 are available"):
        MeshShape(data=2, tensor=2).check_devices(8)
    MeshShape(data=2, tensor=4).check_devices(8)


def test_tensor_and_ulysses_context_must_divide_the_heads() -> None:
    with pytest.raises(ConfigError, match="mesh_tensor=8 does not divide the model's 12 attention heads"):
        MeshShape(tensor=8).check_heads(12, "ulysses")
    with pytest.raises(ConfigError, match="mesh_tensor x mesh_context = 8, .* use context_parallel=ring"):
        MeshShape(tensor=2, context=4).check_heads(4, "ulysses")
    MeshShape(tensor=2, context=4).check_heads(4, "ring")  # ring splits the heads over tensor only


def test_context_must_divide_the_tokens_and_data_fsdp_the_rows() -> None:
    mesh = MeshShape(data=2, context=4)
    with pytest.raises(InvalidRequestError, match="mesh_context=4 does not divide the 30 video tokens"):
        mesh.check_generation(2, (5, 4, 6), (1, 2, 2))  # 5 x 2 x 3 tokens
    with pytest.raises(InvalidRequestError, match="mesh_data x mesh_fsdp = 2 does not divide the 1 transformer rows"):
        mesh.check_generation(1, (5, 8, 8), (1, 2, 2))
    mesh.check_generation(2, (5, 8, 8), (1, 2, 2))  # 80 tokens, 2 rows: fits


def _service(demo_cache, monkeypatch, **overrides):
    monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))
    config = GenerationConfig.from_mapping(dict(model="demo", height=64, width=96, num_frames=9, num_inference_steps=2))
    return build_container(config.with_overrides(overrides)), config


def test_a_mesh_that_does_not_divide_the_demo_heads_fails_at_build(demo_cache, monkeypatch) -> None:
    container, _ = _service(demo_cache, monkeypatch, mesh_tensor=8)  # the demo model has 4 heads
    with pytest.raises(ConfigError, match="mesh_tensor=8 does not divide the model's 4 attention heads"):
        container.mesh()


def test_a_mesh_larger_than_the_devices_fails_at_build(demo_cache, monkeypatch) -> None:
    container, _ = _service(demo_cache, monkeypatch, mesh_tensor=2)  # this process has one device
    with pytest.raises(ConfigError, match="= 2 devices, but 1 are available"):
        container.mesh()


def test_a_request_whose_tokens_do_not_split_fails_before_loading(demo_cache, monkeypatch) -> None:
    container, config = _service(demo_cache, monkeypatch, mesh_context=8)
    request = config.request("a fox", height=48)  # latents 3 x 6 x 12: 3 x 3 x 6 = 54 tokens
    # Loading would fail otherwise: this process has one device, not 8.
    with pytest.raises(InvalidRequestError, match="mesh_context=8 does not divide the 54 video tokens"):
        container.service().generate(request)
