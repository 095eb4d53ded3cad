"""A LoRA file that cannot be applied is refused when it is named (a request's `loras`) or listed
(`--lora`), before anything runs: one with no tensors, one whose factors or alpha hold NaN or
inf. A file's values are read once while it is unchanged."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors.numpy import save_file

from wanjax.application.preflight import RequestLoraCheck
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.lora import LoraSpec

TARGET = "blocks.0.attn1.to_q.weight"
CHECKPOINT = SimpleNamespace(experts=("transformer",), weights=lambda _: {TARGET: np.zeros((8, 6), np.float32)})


def _lora(path, down=None, up=None, alpha=None):
    rng = np.random.default_rng(0)
    tensors = {"diffusion_model.blocks.0.self_attn.q.lora_down.weight": rng.standard_normal((2, 6)).astype(np.float32) if down is None else down,
               "diffusion_model.blocks.0.self_attn.q.lora_up.weight": rng.standard_normal((8, 2)).astype(np.float32) if up is None else up}  # fmt: skip
    if alpha is not None:
        tensors["diffusion_model.blocks.0.self_attn.q.alpha"] = np.array(alpha, np.float32)
    save_file(tensors, path)
    return str(path)


def test_a_good_lora_passes(tmp_path):
    RequestLoraCheck(CHECKPOINT)(((LoraSpec(_lora(tmp_path / "good.safetensors"), 0.8),),))


@pytest.mark.parametrize(
    ("make", "message"),
    [(lambda path: save_file({}, path) or str(path), "holds no tensors"),
     (lambda path: _lora(path, up=np.full((8, 2), np.nan, np.float32)), "hold NaN or infinite values"),
     (lambda path: _lora(path, down=np.full((2, 6), np.inf, np.float32)), "hold NaN or infinite values"),
     (lambda path: _lora(path, alpha=np.inf), "alpha.* must hold one finite number")],
)  # fmt: skip
def test_a_lora_with_no_tensors_or_non_finite_values_is_refused_when_named(tmp_path, make, message):
    path = make(tmp_path / "bad.safetensors")
    with pytest.raises(InvalidRequestError, match=message) as refused:
        RequestLoraCheck(CHECKPOINT)(((LoraSpec(path),),))
    assert str(refused.value).startswith("loras: LoRA ") and "bad.safetensors" in str(refused.value)


def test_a_files_values_are_read_again_only_once_it_changed(tmp_path):
    check = RequestLoraCheck(CHECKPOINT)
    path = _lora(tmp_path / "changing.safetensors")
    check(((LoraSpec(path),),))
    _lora(path, up=np.full((8, 2), np.nan, np.float32))  # same size: its modification time tells
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(InvalidRequestError, match="NaN"):
        check(((LoraSpec(path),),))
