"""A lone transformer file is recognised as the published model whose architecture its shapes show,
for every published Wan model (each published transformer's tensors, shapes only); a file of no
published architecture is refused naming its shapes and what to do."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs
import numpy as np
import pytest
from safetensors.numpy import load_file

from quantized_files import write_gguf
from wanjax.adapters.checkpoints.recognise import file_signature, repo_named_by, spec_signature
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, transformer_weight_shapes
from wanjax.application.presets import resolve_config
from wanjax.domain.architectures import ARCHITECTURES, WAN21_T2V_14B
from wanjax.domain.errors import UnsupportedModelError


class Shapes(Mapping[str, np.ndarray]):
    """Tensor names and shapes, no values: what recognition reads of a file's header."""

    def __init__(self, shapes: dict[str, tuple[int, ...]]) -> None:
        self._shapes = shapes

    def shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def __contains__(self, name: object) -> bool:
        return name in self._shapes

    def __getitem__(self, name: str) -> np.ndarray:
        raise AssertionError("recognition reads shapes, never tensors")

    def __iter__(self) -> Iterator[str]:
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)


@pytest.mark.parametrize("repo", list(ARCHITECTURES))
def test_every_published_transformer_is_recognised_by_its_shapes_alone(repo):
    spec = ARCHITECTURES[repo].transformer
    runtime = TransformerRuntime(dtype=np.float32, param_dtype=np.float32)
    shapes = Shapes(transformer_weight_shapes(abstract_transformer(spec, runtime)))
    signature = file_signature(shapes, repo)
    assert signature == spec_signature(spec)
    same = {r for r, a in ARCHITECTURES.items() if spec_signature(a.transformer) == signature}
    assert same == {r for r, a in ARCHITECTURES.items() if _in_tensors(a.transformer) == _in_tensors(spec)}


def _in_tensors(spec):
    """What of a spec its tensors can show: all but SkyReels-V2's frames per causal block."""
    return attrs.evolve(spec, num_frame_per_block=None)


@pytest.mark.parametrize(
    ("name", "repo"),
    [("wan2.1_t2v_14B_fp8_scaled.safetensors", "Wan-AI/Wan2.1-T2V-14B-Diffusers"),
     ("SkyReels-V2-DF-14B-720P-Q8_0.gguf", "Skywork/SkyReels-V2-DF-14B-720P-Diffusers"),
     ("skyreels_v2_df_14b_540p.safetensors", "Skywork/SkyReels-V2-DF-14B-540P-Diffusers")],
)  # fmt: skip
def test_a_14b_text_to_video_file_is_wan_unless_its_name_says_skyreels(name, repo):
    alike = [r for r, a in ARCHITECTURES.items() if a.num_experts == 1 and _in_tensors(a.transformer) == WAN21_T2V_14B]
    assert repo_named_by(name.lower(), alike) == repo


def test_a_file_of_no_published_architecture_is_refused_naming_its_shapes(tiny_checkpoint, tmp_path):
    tensors = load_file(tiny_checkpoint / "transformer" / "diffusion_pytorch_model.safetensors")
    file = write_gguf(tensors, tmp_path / "tiny.gguf", "F16")
    with pytest.raises(UnsupportedModelError, match=r"width=24, .*blocks=2.*--set transformer_file=FILE"):
        resolve_config(str(file))
