"""Peak dense matmul FLOP/s per device: the denominator of model FLOP utilisation (MFU).

Datasheet numbers without sparsity, per JAX device, matched against JAX's `device_kind`
(e.g. "NVIDIA H100 80GB HBM3", "TPU v6 lite"). `float32` is what an fp32 matmul runs at
under JAX's default precision: TF32 tensor cores on NVIDIA GPUs, one bf16 pass on TPUs.
A device not listed here (and every CPU) has no table entry: measure its ceiling instead.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class DevicePeak:
    """`kind` is a lowercase fragment of `device_kind`; more specific entries come first."""

    kind: str
    bfloat16: float
    float32: float

    def flops(self, dtype: str) -> float:
        return self.float32 if dtype == "float32" else self.bfloat16


PEAKS = (
    # NVIDIA H100 datasheet: SXM BF16 1,979 / TF32 989 TFLOPS, PCIe 1,513 / 756, both "with sparsity" (halved here).
    DevicePeak("h100 pcie", 756e12, 378e12),
    DevicePeak("h100", 989e12, 494.5e12),
    # NVIDIA H200 datasheet (SXM): the H100 SXM's tensor cores with more, faster memory.
    DevicePeak("h200", 989e12, 494.5e12),
    # NVIDIA A100 datasheet: BF16 312, TF32 156 TFLOPS dense.
    DevicePeak("a100", 312e12, 156e12),
    # Cloud TPU system architecture pages, peak compute per chip (BF16); one JAX device per chip.
    DevicePeak("tpu v5 lite", 197e12, 197e12),  # v5e
    DevicePeak("tpu v6 lite", 918e12, 918e12),  # v6e (Trillium)
    DevicePeak("tpu v5", 459e12, 459e12),  # v5p
    DevicePeak("tpu v4", 275e12, 275e12),
    # TPU7x (Ironwood): 2,307 TFLOPS BF16 per chip (Cloud TPU docs, "TPU7x (Ironwood)"). A chip has two
    # TensorCores, and JAX lists each as its own device (8 devices on a 4-chip host), so half per
    # device. Not checked on the hardware here: if a device reports a whole chip, MFU reads 2x high.
    DevicePeak("tpu7x", 2307e12 / 2, 2307e12 / 2),
)


def device_peak(device_kind: str) -> DevicePeak | None:
    """The table's entry for a JAX `device_kind`, or None when it has none (CPUs, unlisted devices)."""
    kind = device_kind.lower()
    return next((peak for peak in PEAKS if peak.kind in kind), None)
