"""LoRAs merged on the device (`merged_parameters`, per request) give the parameters the load-time
merge gives (`with_loras`, `--lora`), for every kind of delta and both block layouts; parameters
no LoRA touches stay the base's own arrays; the switch serves one LoRA set at a time."""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import save_file

from wanjax.adapters.jax.bench import random_transformer
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.lora.factors import LoraFactorCache
from wanjax.adapters.jax.lora.merge import ParameterMerges, merged_parameters
from wanjax.adapters.jax.lora.switch import JaxLoraSwitch
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import (
    export_transformer_weights,
    load_transformer,
    parameter_slots,
    transformer_weight_shapes,
)
from wanjax.adapters.lora import with_loras
from wanjax.domain.lora import LoraSpec
from wanjax.domain.specs import TransformerSpec

SPEC = TransformerSpec(
    patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, text_dim=12,
    freq_dim=8, ffn_dim=24, num_layers=3, cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32,
)  # fmt: skip
RANK = 3


def _pair(rng, shape, prefix, key):
    out, inp = shape[0], shape[1:]
    return {f"{prefix}{key}.lora_down.weight": rng.standard_normal((RANK, *inp)).astype(np.float32),
            f"{prefix}{key}.lora_up.weight": rng.standard_normal((out, RANK, *(1,) * len(inp[1:]))).astype(np.float32)}  # fmt: skip


def _lora_files(tmp_path, shapes):
    """Two files: every kind of delta of the original style (low-rank linears with alpha in two of
    three blocks, the patch embedding's convolution, bias, norm and modulation deltas), and
    diffusers names over some of the same tensors."""
    rng, d = np.random.default_rng(3), "diffusion_model."
    first = {**_pair(rng, shapes["blocks.0.attn1.to_q.weight"], d, "blocks.0.self_attn.q"),
             **_pair(rng, shapes["blocks.2.ffn.net.0.proj.weight"], d, "blocks.2.ffn.0"),
             **_pair(rng, shapes["patch_embedding.weight"], d, "patch_embedding"),
             f"{d}blocks.0.self_attn.q.alpha": np.array(6.0, np.float32),
             f"{d}blocks.2.self_attn.q.diff_b": rng.standard_normal(shapes["blocks.2.attn1.to_q.bias"]).astype(np.float32),
             f"{d}blocks.1.norm3.diff": rng.standard_normal(shapes["blocks.1.norm2.weight"]).astype(np.float32),
             f"{d}blocks.1.diff_m": rng.standard_normal(shapes["blocks.1.scale_shift_table"]).astype(np.float32),
             f"{d}head.head.diff": rng.standard_normal(shapes["proj_out.weight"]).astype(np.float32)}  # fmt: skip
    second = {}
    for target in ("blocks.0.attn1.to_q", "blocks.1.attn2.to_out.0"):
        out, inp = shapes[f"{target}.weight"]
        second |= {f"transformer.{target}.lora_A.weight": rng.standard_normal((2, inp)).astype(np.float32),
                   f"transformer.{target}.lora_B.weight": rng.standard_normal((out, 2)).astype(np.float32)}  # fmt: skip
    save_file(first, tmp_path / "first.safetensors")
    save_file(second, tmp_path / "second.safetensors")
    return [LoraSpec(str(tmp_path / "first.safetensors"), 0.7), LoraSpec(str(tmp_path / "second.safetensors"), -1.3)]


@pytest.mark.parametrize("scan_layers", [True, False], ids=["stacked", "listed"])
def test_the_device_merge_equals_the_load_time_merge(tmp_path, scan_layers):
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=scan_layers)
    base_model = random_transformer(SPEC, runtime)
    tensors = export_transformer_weights(base_model)
    specs = _lora_files(tmp_path, {name: t.shape for name, t in tensors.items()})
    base = nnx.split(base_model)[1]
    cache = LoraFactorCache(transformer_weight_shapes(base_model), capacity=2**20)
    slots = {slot.name: slot for slot in parameter_slots(base_model)}
    merged = merged_parameters(base, slots, [(cache.get(s.path), s.scale) for s in specs], ParameterMerges())
    expected = nnx.split(load_transformer(SPEC, runtime, with_loras(tensors, specs)))[1]
    changed = 0
    for (path, ours), (_, theirs), (_, original) in zip(*(nnx.to_flat_state(s) for s in (merged, expected, base))):
        ours, theirs, original = ours.get_value(), theirs.get_value(), original.get_value()
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, path
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6, err_msg=str(path))
        if np.array_equal(theirs, original):
            assert ours is original, path  # untouched: the base's own array, no copy
        else:
            changed += 1
    assert changed == 8  # q, a q bias, ffn 0, patch embedding, norm2, a modulation table, proj_out, attn2 out
    assert jax.tree.structure(merged) == jax.tree.structure(base)


def test_the_factor_cache_reads_a_file_once_and_keeps_what_fits(tmp_path):
    base_model = random_transformer(SPEC, TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32))
    shapes = transformer_weight_shapes(base_model)
    first, second = _lora_files(tmp_path, shapes)
    cache = LoraFactorCache(shapes, capacity=2**20)
    assert cache.get(first.path) is cache.get(first.path) and cache.files_read == 1
    size = cache.nbytes
    small = LoraFactorCache(shapes, capacity=size)  # room for the first file only
    small.get(first.path), small.get(second.path)
    assert small.nbytes <= size and small.files_read == 2
    small.get(first.path)
    assert small.files_read == 3  # the second pushed it out: read again


def test_one_lora_set_at_a_time_shared_by_its_runs_and_the_base_arrays_come_back(tmp_path):
    base_model = random_transformer(SPEC, TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32))
    first, second = _lora_files(tmp_path, transformer_weight_shapes(base_model))
    denoiser = JaxDenoiser([base_model])
    base = denoiser.program.params
    switch = JaxLoraSwitch(denoiser, cache_bytes=2**20)
    a, b = ((first,),), ((second,),)
    entered = []

    def run(loras, name, hold: threading.Event | None = None):
        with switch.applied(loras):
            entered.append((name, denoiser.program.params))
            if hold is not None:
                hold.wait(10)

    release = threading.Event()
    holder = threading.Thread(target=run, args=(a, "a", release))
    holder.start()
    while not entered:
        time.sleep(0.01)
    other, same = threading.Thread(target=run, args=(b, "b")), threading.Thread(target=run, args=(a, "a again"))
    other.start()
    same.start()
    same.join(10)  # the same set runs beside the holder
    other.join(0.3)
    assert [name for name, _ in entered] == ["a", "a again"] and other.is_alive()  # another set waits
    release.set()
    holder.join(10)
    other.join(10)
    assert [name for name, _ in entered] == ["a", "a again", "b"]
    assert entered[0][1] is entered[1][1] and entered[2][1] is not entered[0][1] and entered[0][1] is not base
    with switch.applied(((),)):
        assert denoiser.program.params is base  # no LoRAs: the base arrays themselves
