"""The `AttentionFn` port on tokamax, Google's library of Pallas attention kernels.

tokamax is an optional dependency: this module imports without it, and the backend
checks for it (and for a platform with kernels) when it is constructed, so a missing
package is a config error at start-up, not a failure mid-run.
"""

from __future__ import annotations

import dataclasses

import jax

from wanjax.adapters.jax.attention.xla import attend_aligned
from wanjax.domain.attention_call import CROSS, HONOURS_BLOCK_CAUSAL, SELF, AttentionCall, refuse_unless_honoured
from wanjax.domain.errors import ConfigError

PLATFORMS = ("gpu", "tpu")


@dataclasses.dataclass(frozen=True)
class TokamaxAttention:
    """`tokamax.dot_product_attention` with its own kernel choice (Mosaic on TPU and
    recent NVIDIA GPUs, Triton on other GPUs, XLA where a kernel declines a shape).

    Keys are padded to a multiple of `key_alignment` and the padding masked out by length.
    Raises ConfigError, naming the fix, where tokamax is not installed or the default
    JAX platform has no tokamax kernels. Refuses a call with a structure: tokamax takes a mask
    as a dense array, and its block-sparse masks are not wired here (untested on devices).
    """

    key_alignment: int = 1

    def __post_init__(self) -> None:
        try:
            import tokamax  # noqa: F401
        except ImportError as error:
            raise ConfigError(
                "attention='tokamax' needs the tokamax package, which is not installed: "
                "`pip install tokamax`, or choose attention=xla (or pallas)"
            ) from error
        platform = jax.default_backend()
        if platform not in PLATFORMS:
            raise ConfigError(
                f"attention='tokamax' has kernels for {' and '.join(PLATFORMS)}, and JAX runs on "
                f"{platform!r}: choose attention=xla (or pallas)"
            )

    def check(self, call: AttentionCall) -> None:
        refuse_unless_honoured("attention=tokamax", frozenset((SELF, CROSS)), call, f"choose {HONOURS_BLOCK_CAUSAL}")

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        self.check(call)
        import tokamax

        return attend_aligned(tokamax.dot_product_attention, q, k, v, self.key_alignment)  # [B, T, N, H]
