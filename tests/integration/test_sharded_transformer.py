"""The transformer forward on several meshes of 8 virtual CPU devices equals the one-device
forward, with the collectives its layout calls for and no all-gather of the token activations.

The 8-device process (tests/eight_devices.py; the device count is fixed at JAX start) builds
a random fp32 model once, places its weights on each mesh with the sharded placement (on one
mesh, then saved to and restored from the converted-weights cache), checks each placed array's
sharding and bytes, runs the same forward, and reports the error and the compiled program's
collectives as JSON. An Animate model (pose latents, a face video through the motion and face
encoders, a face adapter after its block) runs the same way on one mesh of fsdp, tensor and context.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

TOKENS = 48  # latents [8, 3, 8, 8, 16] with patch (1, 2, 2): 3 x 4 x 4
DIM, HEADS, HEAD_DIM, BATCH = 96, 8, 12, 8

# name: ((data, fsdp, tensor, context), context-parallel attention or None, scan_layers)
MESHES = {
    "8 data": ((8, 1, 1, 1), None, True),
    "2 data x 4 context, ulysses": ((2, 1, 1, 4), "ulysses", True),
    "2 data x 4 context, ring": ((2, 1, 1, 4), "ring", True),
    "2 fsdp x 4 tensor": ((1, 2, 4, 1), None, True),
    "2 fsdp x 4 tensor, unscanned layers": ((1, 2, 4, 1), None, False),
    "4 context x 2 tensor, ulysses": ((1, 1, 2, 4), "ulysses", True),
}
RESTORED_FROM_CACHE = "2 fsdp x 4 tensor"
"""This mesh's weights go through a converted-weights cache save and restore before the forward."""
RELATIVE_TOLERANCE = 1e-5
"""fp32 throughout. A mesh only changes the order of sums (tensor parallelism's all-reduce adds
partial matmuls, ring attention's online softmax rescales per block): ~3e-7 of max|out| here.
A layout bug (a wrong shard, a missed halo, a permuted head) errs by O(1)."""


# ---- in the 8-device process (tests/eight_devices.py) ---------------------------------------

COLLECTIVE = re.compile(
    r"= (\S+|\([^)]*\)) (all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\("
)


def _forward(model, latents, timestep, context):
    return model(latents, timestep, context)


def measure(cache_folder: str) -> dict:
    """Each mesh's forward against the one-device forward; its collectives and placed shards."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from wanjax.adapters.jax.attention.context_parallel import RingAttention, UlyssesAttention
    from wanjax.adapters.jax.sharding.activations import ActivationSharding
    from wanjax.adapters.jax.sharding.mesh import build_mesh
    from wanjax.adapters.jax.loading.placement import ShardedPlacement
    from wanjax.adapters.jax.sharding.rules import parameter_shardings
    from wanjax.adapters.jax.transformer.model import WanTransformer
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.transformer.weights import abstract_transformer, set_parameters
    from wanjax.adapters.jax.loading.weights_cache import ConvertedWeightsCache
    from wanjax.domain.sharding import DEFAULT_RULES, MESH_AXES, MeshShape
    from wanjax.domain.specs import TransformerSpec

    spec = TransformerSpec(
        num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, ffn_dim=128, num_layers=2, text_dim=32, freq_dim=32,
        rope_max_seq_len=32,
    )  # fmt: skip
    fp32 = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    reference_model = WanTransformer(spec, fp32, rngs=nnx.Rngs(0))
    host = {tuple(p): np.asarray(n.get_value()) for p, n in nnx.iter_graph(reference_model) if isinstance(n, nnx.Param)}
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((BATCH, 3, 8, 8, 16), dtype=np.float32)  # [B, F, H, W, C]
    timestep = np.linspace(100.0, 900.0, BATCH, dtype=np.float32)  # [B]
    context = rng.standard_normal((BATCH, 7, 32), dtype=np.float32)  # [B, L, text_dim]
    reference = np.asarray(jax.jit(_forward)(reference_model, latents, timestep, context))
    results = {}
    for name, (sizes, attention, scan_layers) in MESHES.items():
        mesh = build_mesh(MeshShape(**dict(zip(MESH_AXES, sizes))))
        self_attention = {"ulysses": UlyssesAttention, "ring": RingAttention}[attention](mesh) if attention else None
        runtime = TransformerRuntime(
            dtype=jnp.float32, param_dtype=jnp.float32, scan_layers=scan_layers, self_attention=self_attention,
            activation_sharding=ActivationSharding(mesh, DEFAULT_RULES),
        )  # fmt: skip
        model = abstract_transformer(spec, runtime)
        shardings = parameter_shardings(model, mesh, DEFAULT_RULES)
        layer_host = host if scan_layers else {
            (p[0], i, *p[1:]) if p[0] == "blocks" else p: (a[i] if p[0] == "blocks" else a)
            for p, a in host.items() for i in (range(spec.num_layers) if p[0] == "blocks" else [0])
        }  # fmt: skip
        placement = ShardedPlacement(shardings, min_bytes=1024)
        placed = placement.put_all(layer_host)
        if name == RESTORED_FROM_CACHE:  # the converted-weights cache restores each array with its own sharding
            cache = ConvertedWeightsCache(Path(cache_folder))
            cache.save("entry", placed)
            layout = {p: jax.ShapeDtypeStruct(a.shape, a.dtype) for p, a in layer_host.items()}
            placed = cache.restore("entry", layout, placement.sharding)
        assert all(placed[p].sharding == shardings[p] for p in placed), name
        assert all(np.asarray(placed[p]).tobytes() == layer_host[p].tobytes() for p in placed), name
        model = set_parameters(model, placed)
        compiled = jax.jit(_forward).lower(model, latents, timestep, context).compile()
        out = np.asarray(compiled(model, latents, timestep, context))
        results[name] = {
            "relative_error": float(np.abs(out - reference).max() / np.abs(reference).max()),
            "collectives": [[kind, shape] for shape, kind in COLLECTIVE.findall(compiled.as_text())],
            "to_q_shard": list(placed[("blocks", "attn1", "to_q", "kernel")].addressable_shards[0].data.shape)
            if scan_layers else None,
        }  # fmt: skip
    return results


ANIMATE_MESH = (1, 2, 2, 2)
"""2 fsdp x 2 tensor x 2 context, ulysses: the face adapters' weights split over fsdp x tensor, their
per-frame attention over tokens split by context (3 frames of 16 tokens in 2 shards of 24: the split
crosses a frame). One mesh of all three, one compilation."""
ANIMATE_PARTS = {
    "face_adapter_to_q": ("animate", "face_adapter", "to_q", "kernel"),
    "motion_encoder_conv_in": ("animate", "motion_encoder", "conv_in", "kernel"),
    "pose_patch_embedding": ("animate", "pose_patch_embedding", "kernel"),
}


def _animate_forward(model, latents, timestep, context, image_context, pose, faces):
    animate = {"animate": {"pose": pose, "face": faces}}
    return model(latents, timestep, context, image_context=image_context, extensions=animate)


def measure_animate() -> dict:
    """An Animate forward on ANIMATE_MESH against one device's; one shard's shape of ANIMATE_PARTS'
    weights."""
    import jax
    import jax.numpy as jnp

    from wanjax.adapters.jax.attention.context_parallel import UlyssesAttention
    from wanjax.adapters.jax.loading.placement import ShardedPlacement
    from wanjax.adapters.jax.sharding.activations import ActivationSharding
    from wanjax.adapters.jax.sharding.mesh import build_mesh
    from wanjax.adapters.jax.sharding.rules import parameter_shardings
    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.transformer.weights import abstract_transformer, set_parameters, storage_layout
    from wanjax.domain.sharding import DEFAULT_RULES, MESH_AXES, MeshShape
    from wanjax.domain.specs import AnimateSpec, TransformerSpec

    spec = TransformerSpec(
        num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, ffn_dim=128, num_layers=1, text_dim=32, freq_dim=32,
        rope_max_seq_len=32, in_channels=36, image_dim=20, added_kv_proj_dim=DIM, animate=AnimateSpec(
            motion_encoder_channel_sizes={"4": 8, "8": 8}, motion_encoder_size=8, motion_style_dim=8,
            motion_dim=4, motion_encoder_dim=8, face_encoder_hidden_dim=8, face_encoder_num_heads=2,
            inject_face_latents_blocks=1,
        ),
    )  # fmt: skip
    fp32 = TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    rng = np.random.default_rng(0)
    # Uniform weights of variance 1 / fan-in made on the host: the modules' own initialisers took
    # longer to run eagerly, or to compile, than the rest of this together.
    host = {
        path: (rng.uniform(-1, 1, s.shape) * (3 / (s.shape[-2] if len(s.shape) > 1 else 1)) ** 0.5).astype(np.float32)
        for path, s in storage_layout(abstract_transformer(spec, fp32)).items()
    }  # fmt: skip
    reference_model = set_parameters(abstract_transformer(spec, fp32), host)
    batch = 2
    inputs = (
        rng.standard_normal((batch, 3, 8, 8, 36), dtype=np.float32),  # latents: the reference frame, then 2
        np.array([900.0, 300.0], np.float32),  # timestep
        rng.standard_normal((batch, 7, 32), dtype=np.float32),  # context
        rng.standard_normal((batch, 5, 20), dtype=np.float32),  # image context
        rng.standard_normal((batch, 2, 8, 8, 16), dtype=np.float32),  # pose latents
        rng.uniform(-1, 1, (batch, 5, 8, 8, 3)).astype(np.float32),  # faces: 4 * 2 - 3 frames
    )
    reference = np.asarray(jax.jit(_animate_forward)(reference_model, *inputs))
    mesh = build_mesh(MeshShape(**dict(zip(MESH_AXES, ANIMATE_MESH))))
    runtime = TransformerRuntime(
        dtype=jnp.float32, param_dtype=jnp.float32, self_attention=UlyssesAttention(mesh),
        activation_sharding=ActivationSharding(mesh, DEFAULT_RULES),
    )  # fmt: skip
    model = abstract_transformer(spec, runtime)
    placed = ShardedPlacement(parameter_shardings(model, mesh, DEFAULT_RULES), min_bytes=1024).put_all(host)
    out = np.asarray(jax.jit(_animate_forward)(set_parameters(model, placed), *inputs))
    return {
        "relative_error": float(np.abs(out - reference).max() / np.abs(reference).max()),
        "shards": {part: list(placed[path].addressable_shards[0].data.shape) for part, path in ANIMATE_PARTS.items()},
        "shapes": {part: list(placed[path].shape) for part, path in ANIMATE_PARTS.items()},
    }


# ---- the tests ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(eight_devices, tmp_path_factory) -> dict:
    return eight_devices.call(__file__, "measure", str(tmp_path_factory.mktemp("weights-cache")))


def _kinds(result: dict) -> set[str]:
    return {kind for kind, _ in result["collectives"]}


def _shapes(result: dict, kind: str) -> list[str]:
    """HLO result shapes of the `kind` collectives, e.g. 'f32[4,48,96]' (layouts dropped)."""
    return [re.sub(r"\{[^}]*\}", "", shape) for k, shape in result["collectives"] if k == kind]


def _dims(shape: str) -> list[int]:
    """'f32[4,48,96]' -> [4, 48, 96]."""
    return [int(n) for n in re.findall(r"\d+", shape.split("[", 1)[1])]


@pytest.mark.parametrize("mesh", list(MESHES))
def test_forward_equals_one_device(results: dict, mesh: str) -> None:
    assert results[mesh]["relative_error"] <= RELATIVE_TOLERANCE


@pytest.mark.parametrize("mesh", list(MESHES))
def test_token_activations_are_never_all_gathered(results: dict, mesh: str) -> None:
    """No all-gather yields an array with the whole token axis: x [B, S, D] and q/k/v [B, S, N, H]
    stay split over context (and their rows over data x fsdp) from patch embedding to head."""
    gathered = [_dims(shape) for shape in _shapes(results[mesh], "all-gather")]
    assert not [d for d in gathered if d[-2:] == [TOKENS, DIM] or d[-3:] == [TOKENS, HEADS, HEAD_DIM]], gathered


def test_data_parallel_needs_no_collective(results: dict) -> None:
    """8 data: replicated weights, one row per device; nothing to exchange."""
    assert results["8 data"]["collectives"] == []


@pytest.mark.parametrize("mesh", ["2 data x 4 context, ulysses", "4 context x 2 tensor, ulysses"])
def test_ulysses_trades_tokens_for_heads_with_all_to_all(results: dict, mesh: str) -> None:
    assert "all-to-all" in _kinds(results[mesh])


def test_ring_passes_key_value_blocks_around_the_context_ring(results: dict) -> None:
    ring = results["2 data x 4 context, ring"]
    assert "collective-permute" in _kinds(ring) and "all-to-all" not in _kinds(ring)


@pytest.mark.parametrize("mesh", ["2 fsdp x 4 tensor", "2 fsdp x 4 tensor, unscanned layers"])
def test_fsdp_gathers_weights_and_tensor_parallel_reduces_partial_sums(results: dict, mesh: str) -> None:
    result = results[mesh]
    # A block's q projection [D, D] is stored split [D / fsdp, D / tensor]: fsdp gathers it to
    # [D, D / tensor] as the layer runs; the row-parallel output projections all-reduce their
    # partial sums [B / fsdp, S, D] over tensor.
    assert f"f32[{DIM},{DIM // 4}]" in _shapes(result, "all-gather")
    assert f"f32[{BATCH // 2},{TOKENS},{DIM}]" in _shapes(result, "all-reduce")


def test_fsdp_and_tensor_split_each_weight_eight_ways(results: dict) -> None:
    # [layers, D, D] kernel: layers whole, D over fsdp (2), the heads' D over tensor (4).
    assert results["2 fsdp x 4 tensor"]["to_q_shard"] == [2, DIM // 2, DIM // 4]


def test_context_and_tensor_all_reduce_token_shards(results: dict) -> None:
    reduced = _shapes(results["4 context x 2 tensor, ulysses"], "all-reduce")
    assert f"f32[{BATCH},{TOKENS // 4},{DIM}]" in reduced


@pytest.fixture(scope="module")
def animate_results(eight_devices) -> dict:
    return eight_devices.call(__file__, "measure_animate")


def test_animate_forward_equals_one_device(animate_results: dict) -> None:
    assert animate_results["relative_error"] <= RELATIVE_TOLERANCE


def test_animate_face_adapters_split_like_blocks_and_its_encoders_stay_whole(animate_results: dict) -> None:
    shards, shapes = animate_results["shards"], animate_results["shapes"]
    # The adapters' stacked [A, D, D] q kernel split as a block's (D over fsdp, the heads' D over
    # tensor); the motion encoder whole on every device; the pose embedding's D over fsdp.
    assert shards["face_adapter_to_q"] == [1, DIM // 2, DIM // 2]
    assert shards["motion_encoder_conv_in"] == shapes["motion_encoder_conv_in"]
    assert shards["pose_patch_embedding"][-1] == DIM // 2
