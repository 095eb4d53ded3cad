"""Staged host-to-device transfer on 8 virtual CPU devices: the same replicated arrays as a
direct replicated device_put. In the 8-device process (tests/eight_devices.py): the device
count is fixed at JAX start."""

from __future__ import annotations

import numpy as np

from wanjax.adapters.jax.loading.staging import is_staged

# ---- in the 8-device process (tests/eight_devices.py) ---------------------------------------


def check_staged_placement(checkpoint_folder: str) -> None:
    """Staged arrays equal directly replicated ones, and went through the gather; a staged
    tiny transformer equals a plainly loaded one."""
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    from wanjax.adapters.checkpoints.diffusers_folder import DiffusersCheckpoint
    from wanjax.adapters.jax.loading.staging import ReplicatedPlacement
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer

    devices = jax.devices()
    assert len(devices) == 8, devices
    gathers = []

    def on_compile(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration" and kwargs["fun_name"] == "jit(_resharded)":
            gathers.append(duration)

    jax.monitoring.register_event_duration_secs_listener(on_compile)
    try:
        placement = ReplicatedPlacement(devices, min_bytes=1024)
        rng = np.random.default_rng(0)
        host = {
            "staged fp32": rng.standard_normal((64, 300), dtype=np.float32),
            "staged bf16": rng.standard_normal((16, 3, 50), dtype=np.float32).astype(ml_dtypes.bfloat16),
            "first axis 7": rng.standard_normal((7, 300), dtype=np.float32),
            "small": rng.standard_normal((8,), dtype=np.float32),
        }
        for name, array in placement.put_all(host).items():
            direct = jax.device_put(host[name], placement.sharding)
            assert array.sharding.is_fully_replicated and array.sharding.device_set == set(devices), name
            for shard in array.addressable_shards:
                assert shard.data.dtype == host[name].dtype, name
                assert np.asarray(shard.data).tobytes() == host[name].tobytes(), name
            assert np.asarray(direct).tobytes() == np.asarray(array).tobytes(), name
        assert len(gathers) == 2, gathers  # compiled for the two staged arrays: they went through the gather
    finally:
        jax.monitoring.unregister_event_duration_listener(on_compile)

    checkpoint = DiffusersCheckpoint(checkpoint_folder)
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    weights = checkpoint.weights("transformer")
    staged = load_transformer(checkpoint.transformer_spec, runtime, weights, placement=placement)
    plain = load_transformer(checkpoint.transformer_spec, runtime, weights)
    a, b = export_transformer_weights(staged), export_transformer_weights(plain)
    assert a.keys() == b.keys() and all(a[n].tobytes() == b[n].tobytes() for n in a)
    kernel = staged.blocks.attn1.to_q.kernel[...]
    assert kernel.sharding.is_fully_replicated and len(kernel.sharding.device_set) == 8


# ---- the tests ------------------------------------------------------------------------------


def test_staged_placement_equals_direct_replication(eight_devices, tiny_checkpoint):
    eight_devices.call(__file__, "check_staged_placement", str(tiny_checkpoint))  # its assertions fail the test


def test_which_arrays_go_the_staged_route():
    assert is_staged((256, 1024), 4, num_devices=8)  # 1 MiB
    assert not is_staged((256, 1024), 4, num_devices=1)  # one device: nothing to stage
    assert not is_staged((7, 1 << 20), 4, num_devices=8)  # the first axis does not split evenly
    assert not is_staged((8, 16), 4, num_devices=8)  # too small to be worth a dispatch
    assert not is_staged((), 4, num_devices=8)
