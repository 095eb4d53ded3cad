"""The converted-weights cache: saved once, restored bitwise on later loads, invalidated by
anything that changes the converted weights (source files, dtype policy, layout)."""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
import pytest

from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
from wanjax.adapters.jax.transformer import experts as experts_module
from wanjax.adapters.jax.transformer.experts import ExpertLoading
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights
from wanjax.adapters.jax.loading.weights_cache import ConvertedWeightsCache
from wanjax.application.container import build_container
from wanjax.application.presets import resolve_config


@pytest.fixture
def conversions(monkeypatch) -> list[int]:
    """Counts conversions from safetensors (the slow path the cache skips)."""
    calls: list[int] = []
    convert = experts_module.convert_transformer_weights

    def counting(*args, **kwargs):
        calls.append(1)
        return convert(*args, **kwargs)

    monkeypatch.setattr(experts_module, "convert_transformer_weights", counting)
    return calls


def _load(checkpoint: DiffusersCheckpoint, cache: ConvertedWeightsCache, dtype=jnp.float32, scan=True, kernel=None):
    runtime = TransformerRuntime(dtype=jnp.float32, param_dtype=dtype, scan_layers=scan)
    loading = ExpertLoading(runtime=runtime, kernel_dtype=kernel, cache=cache)
    return export_transformer_weights(loading.load(checkpoint.transformer_spec, checkpoint.weights("transformer")))


def _assert_bitwise_equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].tobytes() == b[name].tobytes(), name


def test_second_load_restores_bitwise_and_any_change_invalidates(tiny_checkpoint, tmp_path, conversions):
    checkpoint, cache = DiffusersCheckpoint(tiny_checkpoint), ConvertedWeightsCache(tmp_path / "weights")
    first = _load(checkpoint, cache)
    assert len(conversions) == 1 and len(list(cache.folder.iterdir())) == 1

    _assert_bitwise_equal(_load(checkpoint, cache), first)
    assert len(conversions) == 1  # restored, not converted

    bf16 = _load(checkpoint, cache, dtype=jnp.bfloat16)
    fp8 = _load(checkpoint, cache, dtype=jnp.bfloat16, kernel=jnp.float8_e4m3fn)
    _load(checkpoint, cache, scan=False)
    assert len(conversions) == 4 and len(list(cache.folder.iterdir())) == 4  # dtype, fp8 policy, layout
    _assert_bitwise_equal(_load(checkpoint, cache, dtype=jnp.bfloat16), bf16)
    _assert_bitwise_equal(_load(checkpoint, cache, dtype=jnp.bfloat16, kernel=jnp.float8_e4m3fn), fp8)
    assert len(conversions) == 4

    weights = tiny_checkpoint / "transformer" / "diffusion_pytorch_model.safetensors"
    stat = weights.stat()
    try:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # "the file changed"
        _load(checkpoint, cache)
        assert len(conversions) == 5
    finally:
        os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_unreadable_entry_is_converted_again(tiny_checkpoint, tmp_path, conversions, caplog):
    checkpoint, cache = DiffusersCheckpoint(tiny_checkpoint), ConvertedWeightsCache(tmp_path / "weights")
    first = _load(checkpoint, cache)
    (entry,) = cache.folder.iterdir()
    for file in entry.rglob("*"):
        if file.is_file():
            file.write_bytes(b"garbage")
    _assert_bitwise_equal(_load(checkpoint, cache), first)
    assert len(conversions) == 2 and "unreadable" in caplog.text
    _assert_bitwise_equal(_load(checkpoint, cache), first)  # rewritten: restored again
    assert len(conversions) == 2


def test_config_keys_turn_the_cache_on(tiny_checkpoint, tmp_path, conversions):
    config = resolve_config(
        str(tiny_checkpoint),
        {"weights_cache": "true", "weights_cache_dir": str(tmp_path / "w"), "max_sequence_length": "8"},
    )
    request = config.request("a fox", height=32, width=48, num_frames=5, num_inference_steps=2)
    first = build_container(config).service().generate(request, output_type="latent").array
    second = build_container(config).service().generate(request, output_type="latent").array
    assert len(conversions) == 1 and (tmp_path / "w").is_dir()
    np.testing.assert_array_equal(first, second)
