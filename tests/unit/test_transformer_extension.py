"""A new variant's model side is one transformer extension plus a line in each registry: a toy
extension (one input, a stack of D x D projections added after every other block), registered
here only, is built, run by the scanned, listed and streamed block loop alike, loaded and exported
under its names, stored in fp8 and sharded as its rules say, counted by the memory plan and laid
out over the guidance rows, without an edit to the model, the weights, the sharding or the plan."""

from __future__ import annotations

import math
from collections.abc import Mapping

import attrs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.denoising.guider import Guider
from wanjax.adapters.jax.sharding import rules as sharding_rules
from wanjax.adapters.jax.transformer import extensions as transformer_registry
from wanjax.adapters.jax.transformer.extension import NoExtensionHooks, TransformerExtension
from wanjax.adapters.jax.transformer.model import WanTransformer
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.stacking import layer
from wanjax.adapters.jax.transformer.weight_names import LINEAR, Slot
from wanjax.adapters.jax.transformer.weights import (
    abstract_transformer,
    export_transformer_weights,
    load_transformer,
    parameter_slots,
    storage_layout,
)
from wanjax.domain.attention_call import SELF, AttentionCall
from wanjax.domain.conditioning import Conditioning
from wanjax.domain.extensions import registry as domain_registry
from wanjax.domain.extensions.base import ExtensionCost, ModelExtension
from wanjax.domain.guidance import SHARED
from wanjax.domain.memory import transformer_parameters
from wanjax.domain.sharding import EMBED, LAYERS
from wanjax.domain.specs import TransformerSpec

SPEC = TransformerSpec(
    num_attention_heads=2, attention_head_dim=12, text_dim=32, freq_dim=32, ffn_dim=32, num_layers=3
)
EVERY = 2  # a toy adapter after blocks 0 and 2


def _adapters(spec: TransformerSpec) -> int:
    return len(range(0, spec.num_layers, EVERY))


TOY = ModelExtension(
    name="toy",
    inputs={"bias": SHARED},
    present=lambda spec: True,
    cost=lambda spec: ExtensionCost(_adapters(spec) * spec.inner_dim**2, kernels=_adapters(spec) * spec.inner_dim**2),
)


class ToyAdapters(nnx.Module):
    def __init__(self, count: int, dim: int, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        kernel = jax.random.normal(rngs.params(), (count, dim, dim), jnp.float32) / dim
        self.kernel = nnx.Param(kernel.astype(runtime.param_dtype))


class ToyBranch(NoExtensionHooks, nnx.Module):
    """After block i (i even) adds bias [B, D] @ kernel[i / 2] to every token."""

    def __init__(self, spec: TransformerSpec, runtime: TransformerRuntime, *, rngs: nnx.Rngs):
        self.toy_adapters = ToyAdapters(_adapters(spec), spec.inner_dim, runtime, rngs=rngs)
        self.spec = spec

    def prepare(self, inputs: Mapping[str, jax.Array], latent_shape: tuple[int, ...]) -> jax.Array:
        if "bias" not in inputs:
            raise ValueError("the toy extension needs its bias")
        return jnp.asarray(inputs["bias"])

    def before_blocks(self, x, prepared, kv, temb6, rope, attention) -> jax.Array:
        return prepared

    def layer_slots(self) -> np.ndarray:
        slots = np.full(self.spec.num_layers, -1, np.int32)
        slots[::EVERY] = np.arange(_adapters(self.spec))
        return slots

    def after_block(self, x: jax.Array, bias: jax.Array, slot) -> jax.Array:
        added = bias @ self.toy_adapters.kernel[jnp.maximum(slot, 0)]  # [B, D]
        return jnp.where(slot >= 0, x + added[:, None, :], x)


def _toy_slots(spec: TransformerSpec, scan_layers: bool) -> list[Slot]:
    path = ("toy", "toy_adapters", "kernel")
    return [Slot(f"toy_adapters.{i}.weight", path, i, LINEAR) for i in range(_adapters(spec))]


TOY_TRANSFORMER = TransformerExtension(
    model=TOY,
    build=lambda spec, runtime, rngs: ToyBranch(spec, runtime, rngs=rngs),
    weights=_toy_slots,
    rules=sharding_rules.ParameterRules(table=((("toy_adapters", "kernel"), (EMBED, None)),), stacks=("toy_adapters",)),
)


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """The toy's two registry lines."""
    monkeypatch.setattr(domain_registry, "MODEL_EXTENSIONS", (*domain_registry.MODEL_EXTENSIONS, TOY))
    monkeypatch.setattr(transformer_registry, "EXTENSIONS", (*transformer_registry.EXTENSIONS, TOY_TRANSFORMER))


def _model(scan_layers: bool) -> WanTransformer:
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=scan_layers)
    return WanTransformer(SPEC, runtime, rngs=nnx.Rngs(0))


def _inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, 2, 4, 6, 16), dtype=np.float32)
    context = rng.standard_normal((2, 5, 32), dtype=np.float32)
    bias = rng.standard_normal((2, SPEC.inner_dim), dtype=np.float32)
    return latents, np.array([900.0, 300.0], np.float32), context, bias


def _by_hand(model: WanTransformer, latents, timestep, context, bias) -> np.ndarray:
    """The listed model's blocks one by one, the toy's projection added after blocks 0 and 2."""
    kernels = model.toy.toy_adapters.kernel[...]
    x, time = model.embed(latents, timestep, {"toy": bias})
    kv, rope = model.cross_attention_kv(context), model.rope_tables(latents.shape)
    call = AttentionCall(kind=SELF, grid=model.token_grid(latents.shape))
    for i, block in enumerate(model.blocks):
        x = block(x, layer(kv, i), time.temb6, rope, call.at_layer(i))
        if i % EVERY == 0:
            x = x + (bias @ kernels[i // EVERY])[:, None, :]
    return np.asarray(model.head(x, time, model.token_grid(latents.shape)))


def test_the_scanned_listed_and_streamed_loops_run_the_extension_after_its_blocks():
    latents, timestep, context, bias = _inputs()
    scanned, listed = _model(True), _model(False)
    assert scanned.extension_names == ("toy",)
    toy = {"toy": {"bias": bias}}
    expected = _by_hand(listed, latents, timestep, context, bias)
    for model in (scanned, listed):
        out = np.asarray(model(latents, timestep, context, extensions=toy))
        np.testing.assert_allclose(out, expected, rtol=2e-5, atol=2e-5)
    without = np.asarray(listed(latents, timestep, context, extensions={"toy": {"bias": np.zeros_like(bias)}}))
    assert np.abs(without - expected).max() > 1e-3  # the toy acts

    x, time = scanned.embed(latents, timestep, {"toy": bias})
    kv, rope = scanned.cross_attention_kv(context), scanned.rope_tables(latents.shape)
    call = AttentionCall(kind=SELF, grid=scanned.token_grid(latents.shape))
    resident = scanned.run_blocks(x, kv, time.temb6, rope, {"toy": bias}, attention=call)
    streamed = scanned.run_blocks(x, kv, time.temb6, rope, {"toy": bias}, attention=call, stream=True)
    np.testing.assert_array_equal(np.asarray(streamed), np.asarray(resident))


def test_its_inputs_are_asked_for_by_name():
    latents, timestep, context, bias = _inputs()
    model = _model(True)
    with pytest.raises(ValueError, match="the toy extension needs its bias"):
        model(latents, timestep, context)
    with pytest.raises(ValueError, match=r"inputs were given for \['vace'\], but this transformer's extensions are"):
        model(latents, timestep, context, extensions={"toy": {"bias": bias}, "vace": {}})


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scanned", "listed"])
def test_its_weights_load_export_and_store_as_its_rules_say(scan_layers):
    model = _model(scan_layers)
    names = {slot.name for slot in parameter_slots(model)}
    assert {"toy_adapters.0.weight", "toy_adapters.1.weight"} <= names
    exported = export_transformer_weights(model)
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=scan_layers)
    reloaded = export_transformer_weights(load_transformer(SPEC, runtime, exported))
    for name in ("toy_adapters.0.weight", "toy_adapters.1.weight"):
        np.testing.assert_array_equal(reloaded[name], exported[name])

    path = ("toy", "toy_adapters", "kernel")
    assert _fp8_layout(scan_layers)[path].dtype == jnp.float8_e4m3fn
    assert sharding_rules.transformer_logical_axes(path, 3, model.parameter_rules) == (LAYERS, EMBED, None)


def _fp8_layout(scan_layers: bool) -> dict:
    """The storage of a bf16 model's parameters with fp8 kernels (fp32 ones stay fp32)."""
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, scan_layers=scan_layers)
    return storage_layout(abstract_transformer(SPEC, runtime), jnp.float8_e4m3fn)


def test_the_memory_plan_counts_it_as_the_model_holds_it():
    model = _model(True)
    params = {tuple(path): p.get_value() for path, p in nnx.iter_graph(model) if isinstance(p, nnx.Param)}
    total, kernels = transformer_parameters(SPEC)
    assert total == sum(a.size for a in params.values())
    fp8 = [s.shape for s in _fp8_layout(True).values() if s.dtype == jnp.float8_e4m3fn]
    assert kernels == sum(map(math.prod, fp8))
    assert [e.name for e in SPEC.extensions] == ["toy"] and attrs.evolve(SPEC).extensions == (TOY,)


def test_the_guider_lays_out_its_input_as_it_declares():
    bias = np.arange(6, dtype=np.float32).reshape(2, 3)
    rows = Guider(2).rows(Conditioning(extensions=TOY.given(bias=bias)))
    np.testing.assert_array_equal(np.asarray(rows.extension("toy")["bias"]), np.concatenate([bias, bias]))
    with pytest.raises(TypeError, match=r"the toy extension has no input\(s\) \['scale'\]"):
        TOY.given(scale=1.0)
