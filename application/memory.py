"""The memory plan of a request on this checkpoint and config, checked before anything loads."""

from __future__ import annotations

from typing import Any

from wanjax.domain.architectures import CLIP_IMAGE_TOKENS
from wanjax.domain.config import GenerationConfig
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.memory import MemoryPlan, Workload, check_fits, plan_memory
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.sharding import MeshShape


class MemoryPlanner:
    """Plans a request's peak memory from the checkpoint's specs and headers (no weights read)."""

    def __init__(
        self, config: GenerationConfig, checkpoint: Any, dtype: str, attention: str, mesh_shape: MeshShape
    ) -> None:
        self._config = config
        self._checkpoint = checkpoint
        self._dtype = dtype
        self._attention = attention
        self._mesh = mesh_shape

    def plan(self, request: GenerationRequest, batch: int = 1) -> MemoryPlan:
        return planned_on_this_device(self.workload(request, batch))

    def check(self, request: GenerationRequest, batch: int = 1) -> MemoryPlan:
        """The plan; an InvalidRequestError with the plan and what would make it fit where it does not."""
        work = self.workload(request, batch)
        plan = planned_on_this_device(work)
        check_fits(plan, work)
        return plan

    def workload(self, request: GenerationRequest, batch: int = 1) -> Workload:
        config, checkpoint, mesh = self._config, self._checkpoint, self._mesh
        spec, vae = checkpoint.transformer_spec, checkpoint.vae_spec
        geometry = LatentGeometry.of(request, spec, vae)
        image_tokens = (spec.pos_embed_seq_len or CLIP_IMAGE_TOKENS) if spec.uses_image_embeddings else 0
        activations = self._dtype if config.activations_dtype == "auto" else config.activations_dtype
        vae_dtype = self._dtype if config.vae_dtype == "auto" else config.vae_dtype
        encoder_dtype = self._dtype if config.text_encoder_dtype == "auto" else config.text_encoder_dtype
        return Workload(
            transformer=spec,
            num_experts=len(checkpoint.experts),
            rows=batch * (2 if request.uses_guidance else 1),
            tokens=geometry.tokens(spec.patch_size),
            text_tokens=config.max_sequence_length,
            image_tokens=image_tokens,
            weights_dtype=self._dtype if config.weights_dtype == "auto" else config.weights_dtype,
            activations_dtype=activations,
            attention=self._attention,
            kv_cache=config.use_kv_cache,
            vae=vae,
            vae_parameters=checkpoint.weights("vae").parameter_count(),
            vae_dtype=vae_dtype,
            vae_decode_chunk=config.vae_decode_chunk,
            latent_frames=geometry.frames,
            pixels=request.height * request.width,
            vae_tile=config.vae_tile_size if config.vae_tiling else None,
            text_encoder_parameters=checkpoint.weights("text_encoder").parameter_count(),
            text_encoder_dtype=encoder_dtype,
            weight_shards=mesh.fsdp * mesh.tensor,
            row_shards=mesh.batch_ways,
            token_shards=mesh.context,
            devices=mesh.num_devices,
        )


def planned_on_this_device(work: Workload) -> MemoryPlan:
    """`work`'s plan against the free memory of JAX's default device."""
    from wanjax.adapters.jax.device_memory import available_bytes, platform

    return plan_memory(work, platform=platform(), available=available_bytes())
