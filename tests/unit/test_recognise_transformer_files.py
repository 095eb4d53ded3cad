"""A lone transformer file is recognised as the published model whose architecture its shapes show,
for every published Wan model (each published transformer's tensors, shapes only); a file of no
published architecture is refused naming its shapes and what to do."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pytest
from safetensors.numpy import load_file

from quantized_files import write_gguf
from wanjax.adapters.checkpoints.recognise import file_signature, spec_signature
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import abstract_transformer, transformer_weight_shapes
from wanjax.application.presets import resolve_config
from wanjax.domain.architectures import ARCHITECTURES
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
    assert same == {r for r, a in ARCHITECTURES.items() if a.transformer == spec}  # shapes tell them apart


def test_a_file_of_no_published_architecture_is_refused_naming_its_shapes(tiny_checkpoint, tmp_path):
    tensors = load_file(tiny_checkpoint / "transformer" / "diffusion_pytorch_model.safetensors")
    file = write_gguf(tensors, tmp_path / "tiny.gguf", "F16")
    with pytest.raises(UnsupportedModelError, match=r"width=24, .*blocks=2.*--set transformer_file=FILE"):
        resolve_config(str(file))
