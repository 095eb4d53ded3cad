"""The memory plan of a request on this checkpoint and config, checked before anything loads."""

from __future__ import annotations

from typing import Any

from wanjax.domain.architectures import CLIP_IMAGE_TOKENS
from wanjax.domain.config import GenerationConfig
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.memory import MemoryPlan, Workload, check_fits, plan_memory
from wanjax.domain.requests import GenerationRequest


class MemoryPlanner:
    """Plans a request's peak memory from the checkpoint's specs and headers (no weights read)."""

    def __init__(self, settings: GenerationConfig, checkpoint: Any) -> None:
        """`settings`: the resolved config (no `auto` left)."""
        self._settings = settings
        self._checkpoint = checkpoint

    def plan(self, request: GenerationRequest, batch: int = 1) -> MemoryPlan:
        return planned_on_this_device(self.workload(request, batch))

    def check(self, request: GenerationRequest, batch: int = 1) -> MemoryPlan:
        """The plan; an InvalidRequestError with the plan and what would make it fit where it does not."""
        work = self.workload(request, batch)
        plan = planned_on_this_device(work)
        check_fits(plan, work)
        return plan

    def workload(self, request: GenerationRequest, batch: int = 1) -> Workload:
        settings, checkpoint = self._settings, self._checkpoint
        denoiser, mesh = settings.denoiser, settings.mesh.shape
        spec, vae = checkpoint.transformer_spec, checkpoint.vae_spec
        geometry = LatentGeometry.of(request, spec, vae)
        image_tokens = (spec.pos_embed_seq_len or CLIP_IMAGE_TOKENS) if spec.uses_image_embeddings else 0
        return Workload(
            transformer=spec,
            num_experts=len(checkpoint.experts),
            rows=batch * (2 if request.uses_guidance else 1),
            tokens=geometry.tokens(spec.patch_size),
            text_tokens=settings.text_encoder.max_sequence_length,
            image_tokens=image_tokens,
            weights_dtype=denoiser.weights_dtype,
            activations_dtype=denoiser.activations_dtype,
            attention=denoiser.attention,
            kv_cache=denoiser.use_kv_cache,
            vae=vae,
            vae_parameters=checkpoint.weights("vae").parameter_count(),
            vae_dtype=settings.vae.dtype,
            vae_decode_chunk=settings.vae.decode_chunk,
            latent_frames=geometry.frames,
            pixels=request.height * request.width,
            vae_tile=settings.vae.tile,
            text_encoder_parameters=checkpoint.weights("text_encoder").parameter_count(),
            text_encoder_dtype=settings.text_encoder.dtype,
            text_encoder_backend=settings.text_encoder.backend,
            weight_shards=mesh.fsdp * mesh.tensor,
            request_lora_cache=denoiser.lora_cache_mb * 2**20 if denoiser.request_loras else None,
            row_shards=mesh.batch_ways,
            token_shards=mesh.context,
            devices=mesh.num_devices,
        )


def planned_on_this_device(work: Workload) -> MemoryPlan:
    """`work`'s plan against the free memory of JAX's default device."""
    from wanjax.adapters.jax.platform.device_memory import available_bytes, platform

    return plan_memory(work, platform=platform(), available=available_bytes())
