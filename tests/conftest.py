"""Test session setup: JAX is initialised before torch is imported (see STYLE.md)."""

import jax  # noqa: F401  (import order matters: jax first, then torch)
import numpy as np
import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
