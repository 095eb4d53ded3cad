"""Which attention kernel runs: the `attention` config key, `auto` resolved per platform.

`auto` never picks a kernel that materialises the [T, S] logit matrix (`xla` does: ~100 GiB
for Wan 2.1 1.3B at 832x480x81 with guidance):
- cpu: `blockwise`, online softmax in plain XLA, memory bounded by its blocks;
- gpu: `cudnn`, cuDNN's fused flash attention (bf16/fp16, head width <= 128), falling back
  to our Pallas kernel (Triton) for the calls cuDNN does not take (fp32);
- tpu: `pallas`, our Pallas flash kernel (Mosaic), the keys swept as a grid axis.

`blockwise_sage` and `pallas_sage` are never auto's: the blockwise kernel and our Pallas kernel
with q k^T in int8 and p v in fp8 (SageAttention-style), options that trade accuracy for speed
(docs/sampling.md).
"""

from __future__ import annotations

from wanjax.domain.errors import ConfigError

ATTENTION_BACKENDS = ("auto", "xla", "blockwise", "cudnn", "pallas", "tokamax", "blockwise_sage", "pallas_sage")
AUTO_BY_PLATFORM = {"cpu": "blockwise", "gpu": "cudnn", "tpu": "pallas"}
MATERIALISES_LOGITS = ("xla",)
QUANTIZED = ("blockwise_sage", "pallas_sage")


def resolve_attention(name: str, platform: str) -> str:
    """The backend `name` runs on `platform` ("cpu", "gpu", "tpu"): itself, or auto's choice."""
    if name not in ATTENTION_BACKENDS:
        raise ConfigError(f"attention={name!r}: must be one of {', '.join(ATTENTION_BACKENDS)}")
    if name != "auto":
        return name
    return AUTO_BY_PLATFORM.get(platform, "blockwise")


def check_ring_attention(attention: str, context_parallel: str, context: int) -> None:
    """Refuses a quantized `attention` kernel where ring attention would run the self-attention in its
    place: ring folds its K/V blocks in bf16 (and a key smoothing needs every device's keys)."""
    if attention in QUANTIZED and context_parallel == "ring" and context > 1:
        raise ConfigError(
            f"attention={attention} quantizes attention, but context_parallel=ring runs the self-attention "
            f"over {context} devices with its own bf16 kernel: set context_parallel=ulysses (each device then "
            f"runs {attention} over every key), or another attention"
        )
