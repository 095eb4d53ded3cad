"""Attention backends and the matmul ceiling of this machine, as achieved FLOP/s.

Skipped by default (`--benchmark-skip` in pyproject); run with
    .venv/bin/pytest tests/benchmarks/test_attention_bench.py --benchmark-only -s
The Pallas kernel is only timed on GPU/TPU: on CPU it runs in the Pallas interpreter,
whose speed means nothing. The matmul ceiling (one large fp32 matmul) is what any
attention or transformer number on the same machine should be read against.
"""

import functools

import jax
import jax.numpy as jnp
import pytest

from wanjax.adapters.jax.attention.xla import XlaAttention
from wanjax.adapters.jax.attention.blockwise import BlockwiseAttention
from wanjax.adapters.jax.attention.pallas import PallasAttention
from wanjax.adapters.jax.attention.sage import pallas_sage_attention, sage_attention
from wanjax.domain.attention_call import SELF, AttentionCall
from wanjax.domain.flops import attention_flops, matmul_flops

ON_CPU = jax.default_backend() == "cpu"
MATMUL = 4096 if ON_CPU else 16384  # [n, n] @ [n, n]
# (B, T = S, N, H): Wan 1.3B's head layout (12 x 128) at a CPU-sized and a 480p-sized length
ATTENTION = (1, 2048, 12, 128) if ON_CPU else (1, 32760, 12, 128)
DTYPE = jnp.float32 if ON_CPU else jnp.bfloat16


def report(benchmark, name: str, flops: int) -> None:
    seconds = benchmark.stats.stats.min
    benchmark.extra_info.update(flops=flops, tflops_per_s=flops / seconds / 1e12)
    print(f"\n{name} on {jax.devices()[0].device_kind}: {flops / seconds / 1e12:.3f} TFLOP/s "
          f"(best of {benchmark.stats.stats.rounds}: {seconds * 1e3:.1f} ms)")  # fmt: skip


def run_timed(benchmark, fn, *args) -> None:
    compiled = jax.jit(fn).lower(*args).compile()
    compiled(*args).block_until_ready()  # warm-up outside the timing
    benchmark.pedantic(lambda: compiled(*args).block_until_ready(), rounds=5, iterations=1)


def test_matmul_ceiling(benchmark):
    n = MATMUL
    a, b = (jax.random.normal(jax.random.key(i), (n, n), jnp.float32) for i in (0, 1))
    run_timed(benchmark, jnp.matmul, a, b)
    report(benchmark, f"fp32 matmul {n}^3", matmul_flops(n, n, n))


BACKENDS = {
    "xla": XlaAttention,
    "blockwise": BlockwiseAttention,
    "pallas": PallasAttention,
    "blockwise_sage": sage_attention,
    "pallas_sage": pallas_sage_attention,
}


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_attention(benchmark, backend):
    if backend in ("pallas", "pallas_sage") and ON_CPU:
        pytest.skip("Pallas interprets on CPU: its speed is meaningless")
    if backend == "xla" and not ON_CPU:
        pytest.skip("xla holds the whole logit matrix: 51 GiB at this length")
    attention = functools.partial(BACKENDS[backend](), call=AttentionCall(kind=SELF))
    b, t, n, h = ATTENTION
    q, k, v = (jax.random.normal(jax.random.key(i), (b, t, n, h), DTYPE) for i in range(3))
    run_timed(benchmark, attention, q, k, v)
    report(benchmark, f"{backend} attention {ATTENTION} {jnp.dtype(DTYPE).name}", attention_flops(b, t, t, n * h))
