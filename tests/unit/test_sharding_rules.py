"""Logical axis rules: every parameter of every real Wan transformer has one, the
big weights split over the whole 2 fsdp x 4 tensor mesh, and the 14B presets' per-device
parameter memory computed from the shardings of the abstract (`nnx.eval_shape`) model.

Real-size models are never materialised: an `AbstractMesh` needs no devices."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec
from test_transformer_real_configs import CONFIGS

from wanjax.adapters.jax.loading.staging import staged_sharding
from wanjax.adapters.jax.sharding.rules import parameter_shardings, partition_spec
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, storage_layout
from wanjax.domain.sharding import DEFAULT_RULES, MESH_AXES
from wanjax.domain.architectures import WAN21_VACE_14B

GiB = 2**30


def abstract_mesh(data: int = 1, fsdp: int = 1, tensor: int = 1, context: int = 1) -> AbstractMesh:
    return AbstractMesh((data, fsdp, tensor, context), MESH_AXES, axis_types=(AxisType.Auto,) * 4)


def abstract_model(config: str, scan_layers: bool = True):
    spec = CONFIGS[config]
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, scan_layers=scan_layers)
    return abstract_transformer(spec, runtime)


def bytes_per_device(shardings: dict, layout: dict) -> int:
    """The parameter bytes each device holds: one shard of each parameter, all shards of one the
    same size (`partition_spec` splits evenly); works on an `AbstractMesh`."""
    return sum(
        math.prod(shardings[path].shard_shape(abstract.shape)) * np.dtype(abstract.dtype).itemsize
        for path, abstract in layout.items()
    )


def parameter_memory(config: str, mesh: AbstractMesh) -> tuple[int, int]:
    """(bytes per device, total bytes) of one bf16 transformer of `config` on `mesh`."""
    model = abstract_model(config)
    layout = storage_layout(model)
    total = sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in layout.values())
    return bytes_per_device(parameter_shardings(model, mesh, DEFAULT_RULES), layout), total


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_block_weight_is_split_over_the_whole_mesh(config: str, scan_layers: bool) -> None:
    """maxtext's "sufficiently sharded" check: a matmul kernel of a block on 2 fsdp x 4 tensor
    is split 8 ways (FSDP over its model width, tensor parallelism over heads / MLP columns)."""
    model = abstract_model(config, scan_layers)
    shardings = parameter_shardings(model, abstract_mesh(fsdp=2, tensor=4), DEFAULT_RULES)
    kernels = {p: s for p, s in shardings.items() if p[0] == "blocks" and p[-1] == "kernel"}
    assert kernels
    for path, sharding in kernels.items():
        entries = [entry if isinstance(entry, tuple) else (entry,) for entry in sharding.spec if entry]
        assert sorted(axis for entry in entries for axis in entry) == ["fsdp", "tensor"], path


def test_14b_parameter_memory_on_2_fsdp_x_4_tensor_is_an_eighth() -> None:
    """Per device: every weight's shard; the few small replicated ones (norms, biases, the fp32
    modulation tables) add 1.4% to the analytic total / 8 (26.67 GiB / 8 = 3.33 GiB)."""
    per_device, total = parameter_memory("2.1-T2V-14B", abstract_mesh(fsdp=2, tensor=4))
    assert total / GiB == pytest.approx(26.67, abs=0.01)
    assert per_device / GiB == pytest.approx(3.38, abs=0.01)
    assert total / 8 <= per_device <= 1.02 * total / 8


def test_the_a14b_experts_each_take_the_14b_share() -> None:
    per_device, _ = parameter_memory("2.2-T2V-A14B", abstract_mesh(fsdp=2, tensor=4))
    assert 2 * per_device / GiB == pytest.approx(6.76, abs=0.01)  # high- and low-noise experts


def test_a_dimension_splits_only_over_axes_that_divide_it_once_each() -> None:
    mesh = abstract_mesh(data=2, fsdp=2, tensor=2)
    rules = (("embed", ("fsdp",)), ("mlp", ("tensor", "fsdp")), ("activation_batch", ("data", "fsdp")))
    assert partition_spec(("embed", "mlp"), (8, 8), mesh, rules) == PartitionSpec("fsdp", "tensor")  # fsdp used once
    assert partition_spec(("activation_batch", None), (6, 4), mesh, rules) == PartitionSpec("data")  # 6 % 4
    assert partition_spec(("activation_batch", None), (3, 4), mesh, rules) == PartitionSpec()
    assert partition_spec(("embed", None), (8, 8), abstract_mesh(tensor=8), rules) == PartitionSpec()  # fsdp is 1


def test_staged_route_splits_the_first_axis_over_the_replica_axes() -> None:
    mesh = abstract_mesh(data=2, fsdp=2, tensor=2)
    target = NamedSharding(mesh, PartitionSpec("fsdp", "tensor"))  # replicated over data
    assert staged_sharding(target, (8, 8)).spec == PartitionSpec(("fsdp", "data"), "tensor")
    assert staged_sharding(target, (2, 8)) is None  # 2 rows do not split 4 ways
    assert staged_sharding(NamedSharding(mesh, PartitionSpec("fsdp", "tensor", "data")), (8, 8, 8)) is None


@pytest.mark.parametrize("scan_layers", [True, False], ids=["scan", "loop"])
def test_vace_blocks_split_as_the_base_blocks(scan_layers: bool) -> None:
    """Wan 2.1 VACE 14B: the VACE blocks' attention and FFN kernels split 8 ways as the base blocks',
    their hint projections (D -> D into the residual stream) and proj_in over fsdp; fp8 storage
    covers the VACE blocks' kernels."""
    runtime = TransformerRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16, scan_layers=scan_layers)
    model = abstract_transformer(WAN21_VACE_14B, runtime)
    shardings = parameter_shardings(model, abstract_mesh(fsdp=2, tensor=4), DEFAULT_RULES)
    kernels = {p: s.spec for p, s in shardings.items() if p[:2] == ("vace", "blocks") and p[-1] == "kernel"}
    assert len(kernels) == 11 * (1 if scan_layers else 8)  # q, k, v, out twice, 2 FFN, the hint's proj_out
    for path, spec in kernels.items():
        axes = sorted(a for entry in spec if entry for a in (entry if isinstance(entry, tuple) else (entry,)))
        hint = path[-2] == "proj_out" and path[-3] != "ffn"
        assert axes == (["fsdp"] if hint else ["fsdp", "tensor"]), path
    assert shardings[("vace", "proj_in", "kernel")].spec == PartitionSpec("fsdp")
    layout = storage_layout(model, jnp.float8_e4m3fn)
    assert all(layout[p].dtype == jnp.float8_e4m3fn for p in kernels)


def test_fp8_storage_takes_the_animate_face_adapters_and_leaves_its_encoders() -> None:
    """Wan 2.2 Animate-14B: the face adapters' q, k, v and out kernels (0.84B parameters) stored in
    fp8 as the blocks' are; its motion and face encoders and pose patch embedding (an embedder)
    keep the model's dtype (the Animate extension's `rules.stacks`,
    adapters/jax/transformer/animate/extension.py)."""
    layout = storage_layout(abstract_model("2.2-Animate-14B"), jnp.float8_e4m3fn)
    animate = {path: s for path, s in layout.items() if path[0] == "animate"}
    fp8 = {path for path, s in animate.items() if s.dtype == jnp.float8_e4m3fn}
    assert fp8 == {("animate", "face_adapter", name, "kernel") for name in ("to_q", "to_k", "to_v", "to_out")}
    assert sum(math.prod(animate[path].shape) for path in fp8) == 8 * 4 * 5120 * 5120
    kept = {s.dtype for path, s in animate.items() if path not in fp8}
    assert kept <= {jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float32)}
