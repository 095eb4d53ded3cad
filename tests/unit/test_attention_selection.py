"""The `attention` config key picks the backend through the container's Selector, and a
backend the platform cannot run is a ConfigError before any transformer weight loads."""

import sys
from types import SimpleNamespace

import pytest
from dependency_injector import providers

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.attention.pallas import PallasAttention
from wanjax.application.container import build_container
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import ConfigError
from wanjax.domain.specs import TransformerSpec


class CheckpointWithoutWeights(SimpleNamespace):
    def weights(self, component: str):
        raise AssertionError(f"{component} weights were read before the attention backend was checked")


@pytest.mark.parametrize("name, kind", [("xla", XlaAttention), ("pallas", PallasAttention)])
def test_config_selects_the_backend(name, kind):
    assert isinstance(build_container(GenerationConfig.from_mapping(dict(attention=name))).attention(), kind)


def test_unknown_backend_lists_the_known():
    with pytest.raises(ConfigError, match="auto, xla, blockwise, cudnn, pallas, tokamax"):
        GenerationConfig.from_mapping(dict(attention="flash"))


def test_unavailable_backend_fails_before_weights_load(monkeypatch):
    monkeypatch.setitem(sys.modules, "tokamax", None)  # absent here, whatever the environment
    container = build_container(GenerationConfig.from_mapping(dict(attention="tokamax")))
    checkpoint = CheckpointWithoutWeights(transformer_spec=TransformerSpec(), experts=("transformer",))
    container.checkpoint.override(providers.Object(checkpoint))
    with pytest.raises(ConfigError, match="pip install tokamax"):
        container.denoiser()
