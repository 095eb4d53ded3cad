"""The memory plan counts a GGUF transformer's packed block kernels at their stored bytes, read from the
files' headers: Wan 2.2 A14B at 1280x720x81 with Q4_K experts fits a 24 GiB GPU moving one expert at a
time (offload=components), where bf16 experts need their blocks streamed (offload=layers)."""

import attrs
import numpy as np

from wanjax.adapters.checkpoints.gguf_file import GgufWeights
from wanjax.application.memory import packed_kernel_bytes
from wanjax.application.published import PublishedCheckpoint
from wanjax.adapters.checkpoints.checkpoint import ReplacedFiles
from wanjax.domain.memory import GIB, plan_memory, transformer_parameters
from wanjax.domain.offload import least_offload
from wanjax.domain.quantization import bytes_per_value

from quantized_files import stored, write_stored
from test_offload_plan import A14B_720P81


def _weights(work) -> int:
    plan = plan_memory(work, platform="gpu", available=24 * GIB)
    return dict(plan.parts)["transformer weights"]


def _least_offload(work) -> str:
    plan = lambda offload: plan_memory(  # noqa: E731
        attrs.evolve(work, offload=offload), platform="gpu", available=24 * GIB, host_available=256 * GIB
    )
    return least_offload(plan)[0]


def test_packed_kernels_are_counted_at_their_stored_bytes():
    q4_k = attrs.evolve(A14B_720P81, packed_kernel_bytes=bytes_per_value("Q4_K"))
    total, kernels = transformer_parameters(A14B_720P81.transformer)
    expected = 2 * (int(kernels * 144 / 256) + (total - kernels) * 2)  # two experts, the rest in bf16
    assert _weights(q4_k) == expected
    assert _weights(q4_k) < _weights(A14B_720P81) / 3


def test_a14b_720p_with_q4_k_experts_fits_24_gib_with_one_expert_on_the_device():
    assert _least_offload(A14B_720P81) == "layers"
    assert _least_offload(attrs.evolve(A14B_720P81, packed_kernel_bytes=bytes_per_value("Q8_0"))) == "layers"
    assert _least_offload(attrs.evolve(A14B_720P81, packed_kernel_bytes=bytes_per_value("Q4_K"))) == "components"


def test_request_loras_on_packed_kernels_count_their_factors_not_a_second_copy():
    cache = 1024 * 2**20
    part = "request LoRAs: merged copy, factor cache"
    plain = dict(plan_memory(attrs.evolve(A14B_720P81, request_lora_cache=cache), platform="gpu", available=None).parts)
    q4_k = attrs.evolve(A14B_720P81, request_lora_cache=cache, packed_kernel_bytes=bytes_per_value("Q4_K"))
    packed = dict(plan_memory(q4_k, platform="gpu", available=None).parts)
    assert packed[part] == 2 * cache and plain[part] == _weights(A14B_720P81) + cache


def _write(path, types: dict[str, str]):
    rng = np.random.default_rng(0)
    return write_stored({name: stored(rng.normal(size=(8, 256)), kind) for name, kind in types.items()}, path)


def test_the_packed_bytes_come_from_the_files_headers(tmp_path):
    mixed = _write(tmp_path / "mixed.gguf", {"blocks.0.ffn.0.weight": "Q8_0", "blocks.1.ffn.0.weight": "Q4_0",
                                               "text_embedding.0.weight": "Q4_1", "head.head.weight": "F16"})  # fmt: skip
    assert GgufWeights(mixed).block_kernel_bytes() == (34 + 18) / 64  # the blocks' packed kernels alone
    floats = _write(tmp_path / "floats.gguf", {"blocks.0.ffn.0.weight": "F16"})
    assert GgufWeights(floats).block_kernel_bytes() is None
    model = PublishedCheckpoint.of("Wan-AI/Wan2.2-T2V-A14B-Diffusers", ReplacedFiles(transformer=str(mixed)))
    assert packed_kernel_bytes(model) == (34 + 18) / 64
    assert packed_kernel_bytes(PublishedCheckpoint.of("Wan-AI/Wan2.2-T2V-A14B-Diffusers")) is None
