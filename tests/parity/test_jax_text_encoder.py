"""The JAX UMT5 text encoder (`text_encoder_backend=jax`) against transformers' UMT5EncoderModel
and tokenizers, as the torch adapter runs them (the Wan pipelines' reference).

The demo checkpoint's encoder (2 layers, 8 buckets over distance 32) in float32; the relative
position buckets also at Wan's (32, 128) over 512 tokens; a T5Tokenizer folder as transformers
reads Wan's umt5-xxl one. Tolerance 1e-5 of max|reference| on embeddings (measured: 1.3e-6).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from wanjax.adapters.checkpoints.checkpoint import EncoderFiles
from wanjax.adapters.checkpoints.original_t5 import BLOCK, TOP, fp8_values, umt5_config, umt5_tensors
from wanjax.adapters.checkpoints.weights import open_weights
from wanjax.adapters.jax.text.encoder import JaxUmt5TextEncoder
from wanjax.adapters.jax.platform.scaled_kernel import ScaledKernel
from wanjax.adapters.jax.text.umt5 import Umt5Spec, relative_buckets, stack_weights
from wanjax.adapters.text.tokenizer import FastTokenizer
from wanjax.adapters.torch.umt5 import Umt5TextEncoder
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import CheckpointError, ConfigError

RTOL = 1e-5
ORIGINAL_BLOCK = {name: original for original, name in BLOCK.items()}
PROMPTS = ["a red fox running through fresh snow", "", "&lt;b&gt; café  naïve\u00a0\u3000koi ", "x" * 200]


@pytest.fixture(scope="module")
def files(demo_cache: Path) -> EncoderFiles:
    return EncoderFiles(demo_cache / "text_encoder", demo_cache / "tokenizer")


@pytest.mark.parametrize("length", [16, 64, 512])  # 16 truncates the longer prompts
def test_embeddings_equal_transformers(files: EncoderFiles, length: int) -> None:
    ours = JaxUmt5TextEncoder.from_files(files, dtype="float32").encode(PROMPTS, length)
    reference = Umt5TextEncoder.from_files(files, dtype="float32").encode(PROMPTS, length)
    assert ours.shape == reference.shape == (len(PROMPTS), length, 32)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=RTOL * np.abs(reference).max())
    np.testing.assert_array_equal(ours == 0, reference == 0)  # the same rows past each prompt are zero


def test_an_official_weights_file_reads_as_the_torch_adapter_reads_it(files: EncoderFiles, tmp_path: Path) -> None:
    """The official names (`models_t5_umt5-xxl-enc-bf16.pth` style) in one file, no config.json."""
    official = {name: original for original, name in TOP.items()}
    tensors = {}
    for name, tensor in open_weights(files.weights).items():
        if name.startswith("encoder.block."):
            index, rest = name.removeprefix("encoder.block.").split(".", 1)
            tensors[f"blocks.{index}.{ORIGINAL_BLOCK[rest]}"] = np.asarray(tensor)
        elif name in official:
            tensors[official[name]] = np.asarray(tensor)
    save_file(tensors, tmp_path / "t5.safetensors")
    single = EncoderFiles(tmp_path / "t5.safetensors", files.preprocessing)
    ours = JaxUmt5TextEncoder.from_files(single, dtype="float32").encode(PROMPTS[:2], 64)
    reference = Umt5TextEncoder.from_files(single, dtype="float32").encode(PROMPTS[:2], 64)
    np.testing.assert_allclose(ours, reference, rtol=0, atol=RTOL * np.abs(reference).max())


@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (8, 32)])
def test_relative_position_buckets_equal_transformers(buckets: int, distance: int) -> None:
    import torch
    from transformers import UMT5Config
    from transformers.models.umt5.modeling_umt5 import UMT5Attention

    config = UMT5Config(relative_attention_num_buckets=buckets, relative_attention_max_distance=distance)
    attention = UMT5Attention(config, has_relative_attention_bias=True)
    position = torch.arange(512)
    expected = attention._relative_position_bucket(position[None, :] - position[:, None]).numpy()
    spec = Umt5Spec(num_layers=1, num_heads=1, d_kv=1, relative_attention_num_buckets=buckets,
                    relative_attention_max_distance=distance)  # fmt: skip
    np.testing.assert_array_equal(relative_buckets(512, spec), expected)


def test_a_t5_tokenizer_folder_tokenizes_as_transformers_reads_it(tmp_path: Path) -> None:
    """A tokenizer.json written before transformers 5 (Metaspace alone): transformers rebuilds the
    T5 pipeline with a whitespace split first, and so must we; raw strings show the difference."""
    from transformers import AutoTokenizer, T5Tokenizer

    words = "a red fox in snow the koi running".split()
    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    vocab += [(f"▁{word}", -3.0 - i / 10) for i, word in enumerate(words)] + [(c, -8.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    T5Tokenizer(vocab=vocab, extra_ids=0).save_pretrained(tmp_path)
    model = json.loads((tmp_path / "tokenizer.json").read_text())
    model["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    (tmp_path / "tokenizer.json").write_text(json.dumps(model))

    texts = ["a red  fox", "the\tkoi  in snow ", "running" * 9, ""]
    ids, mask = FastTokenizer(tmp_path)(texts, 12)
    expected = AutoTokenizer.from_pretrained(tmp_path)(
        texts, padding="max_length", max_length=12, truncation=True, add_special_tokens=True
    )
    np.testing.assert_array_equal(ids, expected.input_ids)
    np.testing.assert_array_equal(mask, expected.attention_mask)


def test_a_folder_without_tokenizer_json_is_named(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no tokenizer.json.*text_encoder_backend=torch"):
        FastTokenizer(tmp_path)


def test_compiling_the_jax_encoder_with_torch_is_refused() -> None:
    with pytest.raises(ConfigError, match="compile_text_encoder=true applies to the torch text encoder"):
        GenerationConfig().with_overrides({"text_encoder_backend": "jax", "compile_text_encoder": "true"})


def test_a_new_prompt_with_the_jax_encoder_never_imports_torch(demo_cache: Path, tmp_path: Path) -> None:
    """The whole CLI run, prompt not cached; the video is the torch encoder's within one level."""
    script = (
        "import sys, numpy as np; from wanjax.entrypoints.cli import main; "
        "code = main(sys.argv[1:]); print('torch imported:', 'torch' in sys.modules); sys.exit(code)"
    )
    common = ["generate", "--prompt", "a fox in the snow", "--height", "32", "--width", "48", "--num-frames", "5",
              "--steps", "2", "--quiet", "--set", "text_embeddings_cache_dir=none"]  # fmt: skip
    env = {**os.environ, "WANJAX_CACHE": str(demo_cache.parent)}
    videos = {}
    for backend in ("jax", "torch"):
        out = tmp_path / f"{backend}.npy"
        args = [*common, "--set", f"text_encoder_backend={backend}", "--out", str(out)]
        run = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert f"torch imported: {backend == 'torch'}" in run.stdout
        videos[backend] = np.load(out).astype(int)
    assert np.abs(videos["jax"] - videos["torch"]).max() <= 1


def _scaled_fp8_files(files: EncoderFiles, tmp_path: Path) -> tuple[Path, Path]:
    """ComfyUI's `umt5_xxl_fp8_e4m3fn_scaled.safetensors` layout of the demo encoder's random weights:
    transformers' names, each 2-D weight in e4m3 with its `scale_weight`, the `scaled_fp8` marker; and
    the weights it holds, dequantized, as a plain file."""
    from quantized_files import scaled_fp8

    scaled, held = {"scaled_fp8": np.zeros(2, ml_dtypes.float8_e4m3fn)}, {}
    for name, tensor in open_weights(files.weights).items():
        tensor = np.asarray(tensor, np.float32)
        if tensor.ndim == 2 and name != "encoder.embed_tokens.weight":
            scaled[name], scale = scaled_fp8(tensor)
            scaled[name.removesuffix("weight") + "scale_weight"] = np.array(scale, np.float32)
            held[name] = scaled[name].astype(np.float32) * scale
        elif name != "encoder.embed_tokens.weight":
            scaled[name] = held[name] = tensor
    save_file(scaled, tmp_path / "umt5_fp8_scaled.safetensors")
    save_file(held, tmp_path / "umt5_dequantized.safetensors")
    return tmp_path / "umt5_fp8_scaled.safetensors", tmp_path / "umt5_dequantized.safetensors"


def test_a_scaled_fp8_file_reads_as_its_dequantized_weights(files: EncoderFiles, tmp_path: Path) -> None:
    """Both backends: the JAX one keeping the file's fp8 (next test), torch's dequantized on load."""
    scaled, dequantized = _scaled_fp8_files(files, tmp_path)
    for encoder in (JaxUmt5TextEncoder, Umt5TextEncoder):
        ours = encoder.from_files(EncoderFiles(scaled, files.preprocessing), dtype="float32")
        want = encoder.from_files(EncoderFiles(dequantized, files.preprocessing), dtype="float32")
        np.testing.assert_array_equal(ours.encode(PROMPTS, 16), want.encode(PROMPTS, 16))


def test_the_jax_encoder_keeps_a_scaled_fp8_file_in_fp8_and_the_plan_counts_it(
    files: EncoderFiles, demo_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scaled, _ = _scaled_fp8_files(files, tmp_path)
    weights = open_weights(scaled)
    tensors = umt5_tensors(weights, str(scaled))
    stacked = stack_weights(tensors, umt5_config(tensors, str(scaled))["num_layers"], jnp.float32)
    kept = {name: w for name, w in [("embedding", stacked["embedding"]), *stacked["blocks"].items()]
            if isinstance(w, ScaledKernel)}  # fmt: skip
    assert sorted(kept) == ["down", "embedding", "gate", "k", "o", "q", "up", "v"]
    assert all(w.values.dtype == jnp.float8_e4m3fn and w.scale.shape == w.values.shape[:-2] for w in kept.values())
    assert stacked["blocks"]["q"].values.shape[0] == 2 and stacked["blocks"]["position_bias"].dtype == jnp.float32
    fp8 = sum(w.values.size for w in kept.values())
    assert fp8_values(weights, str(scaled)) == fp8
    assert fp8_values(open_weights(files.weights), str(files.weights)) == 0

    from wanjax.application.container import build_container
    from wanjax.application.memory import DeviceSize, MemoryPlanner
    from wanjax.application.presets import resolve_config

    planned = {}
    for backend in ("jax", "torch"):
        monkeypatch.setenv("WANJAX_CACHE", str(demo_cache.parent))
        given = {"text_encoder_file": str(scaled), "text_encoder_backend": backend, "text_encoder_dtype": "float32"}
        config = resolve_config("demo", given)
        container = build_container(config)
        plan = MemoryPlanner(container.settings(), container.checkpoint(), DeviceSize(2**34, 2**36, "cpu"))
        planned[backend] = dict(plan.plan(config.request("a fox")).parts)["text encoder weights"]
    assert planned["torch"] == 4 * weights.parameter_count()  # dequantized into float32
    assert planned["jax"] == planned["torch"] - (4 - 1) * fp8  # the fp8 values at one byte
