"""LoRA adapters: files in the key styles in use for Wan, merged into the weights at load."""

from wanjax.adapters.lora.merge import with_loras
from wanjax.adapters.lora.reader import read_lora

__all__ = ["read_lora", "with_loras"]
