"""The UMT5 prompt encoder in JAX: no torch, and on the accelerator with the rest of the run."""
