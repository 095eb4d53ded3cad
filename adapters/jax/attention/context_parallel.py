"""Context-parallel (sequence-parallel) self-attention: the `AttentionFn` port over a device mesh.

A 720p, 81-frame Wan video is ~75k tokens; one device cannot hold its attention in its
time budget, so the tokens are split over the mesh's "context" axis. Both variants take
q/k/v [B, S, N, H] laid out as the transformer's activations are: batch over
("data", "fsdp"), tokens over "context", heads over "tensor", and return the output in
that same layout. Each equals unsharded attention (scaled softmax, fp32 logits).

- `UlyssesAttention` (DeepSpeed-Ulysses): one all-to-all trades the token shard for a
  head shard, every device attends over the whole sequence for its N / (context x
  tensor) heads with any single-device kernel, and a second all-to-all trades back.
  Two collectives per call; the heads must split over context x tensor.
- `RingAttention`: each device keeps its queries and passes its K/V block around the
  context ring with `ppermute`; the partial softmaxes combine online (log-sum-exp) in
  fp32. No device ever holds more than one remote K/V block, and the heads need only
  split over tensor; context - 1 transfers per call, overlapped with the block compute.
  The folding is the blockwise kernel's, so memory stays bounded by its blocks.

Mesh axes of size 1 are legal and make the matching collective a no-op. Both run the blocks'
self-attention only (a cross call's keys are not the video tokens) and refuse a cross call by
name. A structure (frame-block-causal) is honoured: Ulysses hands the call to its single-device
kernel, which sees the whole sequence and refuses what it does not support; ring attention folds
each key block with the query and key shards' global token indices, skipping the blocks no query
of the device sees.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
from jax import lax
from jax.sharding import Mesh, PartitionSpec

from wanjax.adapters.jax.attention.xla import AttentionFn, XlaAttention
from wanjax.adapters.jax.attention.blockwise import empty_state, fold_keys, heads_first, normalised, visible_keys
from wanjax.adapters.jax.sharding.mesh import BATCH_AXES, CONTEXT, TENSOR
from wanjax.domain.attention_call import FRAME_BLOCK_CAUSAL, SELF, AttentionCall, refuse_unless_honoured
from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.sharding import MESH_AXES

# q/k/v/out [B, S, N, H]: batch over data x fsdp, tokens over context, heads over tensor.
QKV_SPEC = PartitionSpec(BATCH_AXES, CONTEXT, TENSOR, None)
WHOLE_BATCH_SPEC = PartitionSpec(None, CONTEXT, TENSOR, None)
SELF_ONLY = (
    "context parallelism runs the blocks' self-attention only; the other calls take the "
    "single-device kernel (the transformer runtime's `attention`)"
)


def qkv_spec(mesh: Mesh, batch: int) -> PartitionSpec:
    """QKV_SPEC, or the batch whole on every data x fsdp device where they do not divide it (a
    CFG-cache step runs the conditional rows alone: half the rows the mesh was sized for), as
    the transformer's activation rules then lay it out."""
    return QKV_SPEC if batch % math.prod(mesh.shape[a] for a in BATCH_AXES) == 0 else WHOLE_BATCH_SPEC

def _check_mesh_axes(mesh: Mesh) -> None:
    missing = [a for a in MESH_AXES if a not in mesh.axis_names]
    if missing:
        raise ConfigError(
            f"context-parallel attention needs a mesh with the axes {MESH_AXES} "
            f"(size 1 where unused); this mesh has {mesh.axis_names}, missing {missing}"
        )


def _check_divides(mesh: Mesh, q: jax.Array, k: jax.Array, head_axes: tuple[str, ...], variant: str) -> None:
    """Raises a named error unless the mesh splits q [B, T, N, H] and k [B, S, N, H] evenly."""
    _, queries, heads, _ = q.shape
    keys = k.shape[1]
    head_split = math.prod(mesh.shape[a] for a in head_axes)
    context = mesh.shape[CONTEXT]
    if heads % head_split:
        axes = " x ".join(f"{a}={mesh.shape[a]}" for a in head_axes)
        axes += f" = {head_split}" if len(head_axes) > 1 else ""
        raise ConfigError(
            f"{variant} attention splits the {heads} attention heads over {axes}, "
            f"which does not divide them: choose mesh axis sizes whose product divides {heads}"
            + (", or ring attention (heads over tensor only)" if CONTEXT in head_axes else "")
        )
    for name, length in (("query", queries), ("key", keys)):
        if length % context:
            raise InvalidRequestError(
                f"{variant} attention splits the {length} {name} tokens over context={context}, which does "
                "not divide them: choose a video size and frame count whose token count (F' x H' x W') "
                f"is a multiple of {context}, or a context axis size that divides {length}"
            )


@dataclasses.dataclass(frozen=True)
class UlyssesAttention:
    """All-to-all (Ulysses) context-parallel attention (`AttentionFn`) on `mesh`.

    `local` attends over the full sequence for each device's heads; its padding to
    `key_alignment` happens there, on the whole key sequence.
    """

    mesh: Mesh
    local: AttentionFn = dataclasses.field(default_factory=XlaAttention)

    def __post_init__(self) -> None:
        _check_mesh_axes(self.mesh)

    @property
    def key_alignment(self) -> int:
        return self.local.key_alignment

    def check(self, call: AttentionCall) -> None:
        """Self-attention only; the rest is the local kernel's to honour or refuse."""
        refuse_unless_honoured("context_parallel=ulysses", frozenset((SELF, FRAME_BLOCK_CAUSAL)), call, SELF_ONLY)
        self.local.check(call)

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        self.check(call)
        _check_divides(self.mesh, q, k, (CONTEXT, TENSOR), "ulysses")

        def per_device(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            # [b, s, n, H] (s = S / context, n = N / tensor) -> [b, S, n / context, H]
            to_heads = lambda x: lax.all_to_all(x, CONTEXT, split_axis=2, concat_axis=1, tiled=True)
            out = self.local(to_heads(q), to_heads(k), to_heads(v), call)  # [b, T, n / context, H]
            return lax.all_to_all(out, CONTEXT, split_axis=1, concat_axis=2, tiled=True)  # [b, t, n, H]

        return _over_mesh(per_device, self.mesh, qkv_spec(self.mesh, q.shape[0]))(q, k, v)  # [B, T, N, H]


@dataclasses.dataclass(frozen=True)
class RingAttention:
    """Ring context-parallel attention (`AttentionFn`) on `mesh`: K/V blocks travel the
    context ring, queries stay; never pads keys (`key_alignment` 1).

    Each device folds every key block that reaches it into one online-softmax state of its
    queries with the blockwise kernel (adapters/jax/attention/blockwise.py): `query_chunk`
    queries by `key_chunk` keys at a time (None: the whole block), so the fp32 logits held at
    once are [b, n, query_chunk, key_chunk], not [b, n, T / context, S / context]: at 720p
    (S = 75600) on 8 context devices a whole block's logits are 357 MB per head and row.
    """

    mesh: Mesh
    key_chunk: int | None = 512
    query_chunk: int = 1024

    def __post_init__(self) -> None:
        _check_mesh_axes(self.mesh)
        for name, chunk in (("key_chunk", self.key_chunk), ("query_chunk", self.query_chunk)):
            if chunk is not None and chunk < 1:
                raise ConfigError(f"ring attention {name}={chunk}: must be a positive token count, or None")

    @property
    def key_alignment(self) -> int:
        return 1

    def check(self, call: AttentionCall) -> None:
        refuse_unless_honoured("context_parallel=ring", frozenset((SELF, FRAME_BLOCK_CAUSAL)), call, SELF_ONLY)

    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, call: AttentionCall) -> jax.Array:
        self.check(call)
        _check_divides(self.mesh, q, k, (TENSOR,), "ring")
        context = self.mesh.shape[CONTEXT]
        to_next = [(i, (i + 1) % context) for i in range(context)]
        block = k.shape[1] // context
        fold = functools.partial(
            fold_keys, block_q=self.query_chunk, block_k=self.key_chunk or block, visible=visible_keys(call)
        )
        spec = qkv_spec(self.mesh, q.shape[0])

        def per_device(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
            # q [b, t, n, H], k/v [b, s, n, H]: this device's tokens and heads, made heads-first.
            q, k, v = map(heads_first, (q, k, v))
            here = lax.axis_index(CONTEXT)
            # Global token indices: this device's queries, and the keys that reach it on visit i
            # (they started on device here - i).
            on_device = lambda i, k, v, state: fold(  # noqa: E731
                q, k, v, state, query_offset=here * q.shape[2], key_offset=(here - i) % context * k.shape[2]
            )

            def visit(i: jax.Array, carry: tuple) -> tuple:
                k, v, state = carry
                k_next, v_next = lax.ppermute((k, v), CONTEXT, to_next)  # overlaps the block below
                return k_next, v_next, on_device(i, k, v, state)

            k, v, state = lax.fori_loop(0, context - 1, visit, (k, v, empty_state(q)))
            return normalised(on_device(context - 1, k, v, state), q.dtype)  # [b, t, n, H]

        return _over_mesh(per_device, self.mesh, spec)(q, k, v)  # [B, T, N, H]


def _over_mesh(per_device: Callable[..., jax.Array], mesh: Mesh, spec: PartitionSpec) -> Callable[..., jax.Array]:
    """`per_device` mapped over the shards of q/k/v -> out, all laid out as `spec`."""
    return jax.shard_map(per_device, mesh=mesh, in_specs=(spec,) * 3, out_specs=spec)
