"""A published model's shapes standing in for its checkpoint, so that `wanjax plan` answers
before its weights are downloaded (the architecture `wanjax bench` builds)."""

from __future__ import annotations

from pathlib import Path

import attrs

from wanjax.adapters.checkpoints.checkpoint import ReplacedFiles
from wanjax.adapters.checkpoints.original_names import transformer_weights
from wanjax.adapters.checkpoints.weights import Weights

from wanjax.domain.architectures import (
    UMT5_XXL_ENCODER_PARAMETERS,
    WAV2VEC2_LARGE_PARAMETERS,
    Architecture,
    published_architecture,
)
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.memory import transformer_parameters
from wanjax.domain.specs import TransformerSpec, VaeSpec


@attrs.frozen
class ParameterCount:
    count: int

    def parameter_count(self) -> int:
        return self.count


@attrs.frozen
class PublishedCheckpoint:
    """What the memory plan reads of a checkpoint (specs, experts, parameter counts), from
    `domain.architectures` instead of files."""

    architecture: Architecture
    vae_parameters: int
    expert_files: dict[str, Path] = attrs.field(factory=dict)
    """Transformer files given (`transformer_file`, `transformer_2_file`): their headers say how their
    kernels are stored (a GGUF file's packed blocks), read without the rest of the checkpoint."""

    @classmethod
    def of(cls, repo_id: str, replaced: ReplacedFiles = ReplacedFiles()) -> PublishedCheckpoint:
        architecture = published_architecture(repo_id)
        experts = ("transformer", "transformer_2")[: architecture.num_experts]
        files = {expert: replaced.get(expert) for expert in experts if replaced.get(expert) is not None}
        return cls(architecture, vae_parameter_count(architecture.vae), files)

    @property
    def transformer_spec(self) -> TransformerSpec:
        return self.architecture.transformer

    @property
    def vae_spec(self) -> VaeSpec:
        return self.architecture.vae

    @property
    def image_conditioning(self) -> ImageConditioning:
        return self.architecture.image_conditioning

    @property
    def experts(self) -> tuple[str, ...]:
        return ("transformer", "transformer_2")[: self.architecture.num_experts]

    def weights(self, component: str) -> ParameterCount | Weights:
        if component in self.expert_files:
            return transformer_weights(self.expert_files[component])
        counts = {"vae": self.vae_parameters, "text_encoder": UMT5_XXL_ENCODER_PARAMETERS,
                  "speech_encoder": WAV2VEC2_LARGE_PARAMETERS}  # fmt: skip
        counts |= dict.fromkeys(self.experts, transformer_parameters(self.transformer_spec)[0])
        return ParameterCount(counts[component])


def vae_parameter_count(spec: VaeSpec) -> int:
    """The VAE's parameters (encoder and decoder, as its checkpoint holds them), from its abstract model."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from wanjax.adapters.jax.vae.model import WanVAE
    from wanjax.adapters.jax.vae.runtime import VaeRuntime

    runtime = VaeRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    abstract = nnx.eval_shape(lambda: WanVAE(spec, runtime, rngs=nnx.Rngs(0)))
    return sum(leaf.size for leaf in jax.tree.leaves(nnx.state(abstract, nnx.Param)))
