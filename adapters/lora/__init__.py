"""LoRA adapters: files in the key styles in use for Wan, merged into the weights at load."""

from wanjax.adapters.lora.merge import fitted_deltas, with_loras
from wanjax.adapters.lora.reader import read_lora

__all__ = ["fitted_deltas", "read_lora", "with_loras"]
