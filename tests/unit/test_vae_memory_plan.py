"""The memory plan's VAE terms against XLA's own buffer assignment of the published VAEs.

Only compiled (with wanjax's XLA options: XLA's own convolutions on CPU), never run: the weights
are abstract (`nnx.eval_shape`), so each case costs its compile (seconds). The plan counts
resident memory, which on XLA:CPU exceeds the assignment by `VAE_DECODE_RESIDENT`; divided by it,
the plan must be within 15% of what XLA assigns. Real sizes;
frame counts that scan two steps at least (one step, XLA drops the loop and assigns much less,
which the plan overestimates); memory is flat in frames beyond. A tiled encode of two tiles of the
Wan 2.2 VAE (512 pixels square: diffusers cuts them after patchifying; the plan once took a
quarter). A tiled decode of two 256-pixel tiles: the Wan 2.2 VAE in the per-frame form, whose
kernel slices once made it 4x the plan (a tiled compile costs twice an untiled one;
docs/performance.md has both forms of both VAEs tiled at 832x480 and 1280x704).
"""

import jax
import numpy as np
import pytest
from flax import nnx

from wanjax.adapters.jax.platform.compiled import xla_options
from wanjax.adapters.jax.vae.model import WanVAE
from wanjax.adapters.jax.vae.runtime import VaeRuntime, VaeTiling
from wanjax.domain.architectures import WAN21_VAE, WAN22_VAE
from wanjax.domain.vae_memory import VAE_DECODE_RESIDENT, vae_decode_bytes, vae_encode_bytes
from wanjax.domain.specs import VaeSpec

# Two 256-pixel tiles side by side, of one shape: one tile body to compile (diffusers' overlapping
# tiles give two shapes at least, and so twice the compile)
ABUTTING = VaeTiling(tile_sample_stride_height=256, tile_sample_stride_width=256)

CASES = [  # VAE, mode, height, width, frames, runtime
    (WAN21_VAE, "decode", 480, 832, 9, VaeRuntime(convolution="frames")),
    (WAN21_VAE, "decode", 480, 832, 13, VaeRuntime(convolution="3d", decode_chunk=2)),
    (WAN22_VAE, "decode", 704, 1280, 9, VaeRuntime(convolution="frames")),
    (WAN21_VAE, "encode", 480, 832, 9, VaeRuntime(convolution="frames")),
    (WAN22_VAE, "decode", 256, 512, 9, VaeRuntime(convolution="frames", tiling=ABUTTING)),
    (WAN22_VAE, "encode", 512, 1024, 9, VaeRuntime(convolution="frames", tiling=ABUTTING)),
]
IDS = ["2.1-decode", "2.1-decode-3d-chunk2", "2.2-decode", "2.1-encode", "2.2-tiled", "2.2-tiled-encode"]


def _assigned(spec: VaeSpec, mode: str, height: int, width: int, frames: int, runtime: VaeRuntime) -> int:
    graphdef, params = nnx.split(nnx.eval_shape(lambda: WanVAE(spec, runtime, rngs=nnx.Rngs(0))))
    s = spec.spatial_compression
    if mode == "decode":
        x = jax.ShapeDtypeStruct((1, 1 + (frames - 1) // 4, height // s, width // s, spec.z_dim), np.float32)
        run = lambda p, x: nnx.merge(graphdef, p).decode(x)
    else:
        x = jax.ShapeDtypeStruct((1, frames, height, width, 3), np.float32)
        run = lambda p, x: nnx.merge(graphdef, p).encode(x)
    return jax.jit(run).lower(params, x).compile(xla_options()).memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_vae_plan_is_within_15_percent_of_xla_assignment(case) -> None:
    spec, mode, height, width, frames, runtime = case
    tile = runtime.tiling and runtime.tiling.tile_sample_min_height
    if mode == "decode":
        planned = vae_decode_bytes(
            spec, height * width, 1 + (frames - 1) // 4, runtime.decode_chunk, tile, convolution=runtime.convolution
        )
    else:
        planned = vae_encode_bytes(spec, height * width, frames, runtime.encode_chunk, tile)
    assigned = _assigned(spec, mode, height, width, frames, runtime)
    assert abs(planned / VAE_DECODE_RESIDENT - assigned) <= 0.15 * assigned, (planned, assigned)
