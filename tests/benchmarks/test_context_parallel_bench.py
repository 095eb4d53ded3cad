"""Context-parallel self-attention (Ulysses, ring) on 8 virtual CPU devices against unsharded
XLA attention on one device, timed in the same process, as ratios.

Skipped by default (`--benchmark-skip` in pyproject); run with
    .venv/bin/pytest tests/benchmarks/test_context_parallel_bench.py --benchmark-enable -s -p no:cacheprovider
The 8 devices are virtual: they share this machine's cores, so the ratios measure what the
collectives and the blockwise softmax cost, not a speed-up (on real accelerators each device
computes 1/8 of the work). The benchmark's own time is the whole comparison's wall time;
the numbers to read are the printed table (also in the benchmark's extra_info).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time

import numpy as np

QKV_SHAPE = (1, 2048, 16, 64)  # [B, S, N, H]: 16 heads (Ulysses splits them 8 ways), a CPU-sized sequence
MESH = (1, 1, 1, 8)  # data, fsdp, tensor, context
ROUNDS = 5


def _best_seconds(fn, *args) -> float:
    fn(*args).block_until_ready()  # compiled and warmed up outside the timing
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return min(times)


def _measure() -> dict[str, float]:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding

    from wanjax.adapters.jax.attention.xla import XlaAttention
    from wanjax.adapters.jax.attention.context_parallel import QKV_SPEC, RingAttention, UlyssesAttention
    from wanjax.domain.attention_call import SELF, AttentionCall

    assert len(jax.devices()) == 8, jax.devices()
    mesh = Mesh(np.array(jax.devices()).reshape(MESH), ("data", "fsdp", "tensor", "context"))
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(QKV_SHAPE, np.float32) for _ in range(3)]
    one_device = [jax.device_put(x, jax.devices()[0]) for x in host]
    sharded = [jax.device_put(x, NamedSharding(mesh, QKV_SPEC)) for x in host]
    cases = {
        "xla, 1 device": (XlaAttention(), one_device),
        "ulysses, 8 context": (UlyssesAttention(mesh), sharded),
        "ring, 8 context": (RingAttention(mesh, key_chunk=None), sharded),
        "ring, 8 context, 64-key chunks": (RingAttention(mesh, key_chunk=64), sharded),
    }
    call = AttentionCall(kind=SELF)
    return {
        name: _best_seconds(jax.jit(functools.partial(attend, call=call)), *args) for name, (attend, args) in cases.items()
    }


def test_context_parallel_attention_against_unsharded(benchmark):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}

    def compare() -> dict[str, float]:
        done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.splitlines()[-1])

    seconds = benchmark.pedantic(compare, rounds=1, iterations=1)
    baseline = seconds["xla, 1 device"]
    benchmark.extra_info.update({name: {"ms": s * 1e3, "vs_unsharded": s / baseline} for name, s in seconds.items()})
    print(f"\nq/k/v {QKV_SHAPE} fp32, best of {ROUNDS}:")
    print("| attention | ms | time / unsharded |\n| --- | --- | --- |")
    for name, s in seconds.items():
        print(f"| {name} | {s * 1e3:.1f} | {s / baseline:.2f} |")
    assert all(s > 0 for s in seconds.values())


if __name__ == "__main__":
    print(json.dumps(_measure()))
