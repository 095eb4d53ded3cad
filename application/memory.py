"""The memory plan of a request on this checkpoint and config, checked before anything loads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from wanjax.adapters.checkpoints.gguf_file import PackedTensors
from wanjax.adapters.checkpoints.original_t5 import fp8_values
from wanjax.domain.architectures import CLIP_IMAGE_TOKENS
from wanjax.domain.conditioning import ImageConditioning
from wanjax.domain.config import GenerationConfig
from wanjax.domain.latents import LatentGeometry
from wanjax.domain.memory import MemoryPlan, Workload, check_fits, plan_memory
from wanjax.domain.modes.base import ModelTraits
from wanjax.domain.modes.registry import resolved_mode
from wanjax.domain.offload import AUTO, covering, least_offload
from wanjax.domain.requests import GenerationRequest


@attrs.frozen
class DeviceSize:
    """The memory to plan for: this machine's (the defaults, read when planning), a device named
    on the command line (`wanjax plan --device-memory 24GiB`, planned as a GPU's), or this
    machine's as measured once (`measured`, with its platform)."""

    device: int | None = None
    host: int | None = None
    platform: str | None = None

    def measured(self) -> DeviceSize:
        """The sizes not given, read now, and the platform they are read on."""
        from wanjax.adapters.jax.platform.device_memory import available_bytes, host_available_bytes, platform

        if self.device is not None:
            return self
        return DeviceSize(device=available_bytes(), host=self.host or host_available_bytes(), platform=platform())


def packed_kernel_bytes(checkpoint: Any) -> float | None:
    """Bytes per value of the experts' packed block kernels (GGUF files; the largest over the experts),
    from the files' headers; None where no expert's are packed."""
    weights = [checkpoint.weights(expert) for expert in checkpoint.experts]
    sizes = [w.block_kernel_bytes() for w in weights if isinstance(w, PackedTensors)]
    sizes = [size for size in sizes if size is not None]
    return max(sizes) if sizes else None


class MemoryPlanner:
    """Plans a request's peak memory from the checkpoint's specs and headers (no weights read),
    and decides `offload=auto`: the least offload whose plan fits."""

    def __init__(self, settings: GenerationConfig, checkpoint: Any, size: DeviceSize = DeviceSize()) -> None:
        """`settings`: the resolved config (no `auto` left but `offload`)."""
        self._settings = settings
        self._checkpoint = checkpoint
        self._size = size
        self._decided: str | None = None

    def plan(self, request: GenerationRequest, batch: int = 1) -> MemoryPlan:
        return self._planned(self.workload(request, batch))

    def check(self, request: GenerationRequest, batch: int = 1) -> MemoryPlan:
        """The plan; an InvalidRequestError with the plan and what would make it fit where it does not."""
        work = self.workload(request, batch)
        plan = self._planned(work)
        check_fits(plan, work)
        return plan

    def checker(self) -> Callable[[GenerationRequest, int], MemoryPlan]:
        """`check(request, batch)` against this machine's free memory as it is now, measured once: a
        server measures before its model loads, since each plan counts the weights themselves."""
        return MemoryPlanner(self._settings, self._checkpoint, self._size.measured()).check

    def offload(self) -> str:
        """The offload the denoiser loads with: as set; for `auto`, what covers the choice of every
        checked request (none checked: the config's default request's)."""
        if self._settings.denoiser.offload != AUTO:
            return self._settings.denoiser.offload
        if self._decided is None:
            self.workload(self._settings.request("the config's default request"))
        assert self._decided is not None
        return self._decided

    def workload(self, request: GenerationRequest, batch: int = 1) -> Workload:
        """`request`'s workload; with `offload=auto`, at the least offload whose plan fits."""
        work = self._workload(request, batch)
        if self._settings.denoiser.offload != AUTO:
            return work
        choice, _ = least_offload(lambda offload: self._planned(attrs.evolve(work, offload=offload)))
        self._decided = choice if self._decided is None else covering(self._decided, choice)
        return attrs.evolve(work, offload=choice)

    def _planned(self, work: Workload) -> MemoryPlan:
        plan = planned_on_this_device(work, self._size)
        return attrs.evolve(plan, auto=self._settings.denoiser.offload == AUTO)

    def _workload(self, request: GenerationRequest, batch: int) -> Workload:
        settings, checkpoint = self._settings, self._checkpoint
        denoiser, mesh = settings.denoiser, settings.mesh.shape
        spec, vae = checkpoint.transformer_spec, checkpoint.vae_spec
        traits = ModelTraits.of(checkpoint)
        mode = resolved_mode(request, traits)
        video = LatentGeometry.of(request, spec, vae)
        geometry = mode.geometry(request, video)  # what is denoised (VACE: its reference frames too)
        image_tokens = (spec.pos_embed_seq_len or CLIP_IMAGE_TOKENS) if spec.uses_image_embeddings else 0
        text_encoder = checkpoint.weights("text_encoder")
        tokens = mode.run_geometry(request, geometry).sequence_tokens(spec)
        # Wan 2.2 TI2V's first frame: a timestep per token (its tokens at 0)
        per_token_time = traits.image_conditioning is ImageConditioning.FIRST_FRAME and request.input("image") is not None
        return Workload(
            transformer=spec,
            num_experts=len(checkpoint.experts),
            rows=batch * (2 if request.uses_guidance else 1),
            tokens=tokens,
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
            latent_frames=video.frames,
            pixels=request.height * request.width,
            vae_tile=settings.vae.tile,
            vae_convolution=settings.vae.convolution,
            vae_encode_frames=mode.encoded_frames(request),
            held_frames=batch * mode.segment_frames(request),
            vae_encode_chunk=settings.vae.encode_chunk,
            text_encoder_parameters=text_encoder.parameter_count(),
            text_encoder_fp8_parameters=fp8_values(text_encoder, "the text encoder file"),
            text_encoder_dtype=settings.text_encoder.dtype,
            text_encoder_backend=settings.text_encoder.backend,
            speech_encoder_parameters=checkpoint.weights("speech_encoder").parameter_count() if spec.is_s2v else 0,
            speech_encoder_dtype=settings.model.dtype,
            weight_shards=mesh.fsdp * mesh.tensor,
            packed_kernel_bytes=packed_kernel_bytes(checkpoint),
            request_lora_cache=denoiser.lora_cache_mb * 2**20 if denoiser.request_loras else None,
            row_shards=mesh.batch_ways,
            token_shards=mesh.context,
            devices=mesh.num_devices,
            offload=denoiser.offload,
            step_cache=request.cache.held(),
            videos=batch,
            time_tokens=tokens if per_token_time else 1,
        )


def planned_on_this_device(work: Workload, size: DeviceSize = DeviceSize()) -> MemoryPlan:
    """`work`'s plan against the free memory of JAX's default device and of the host, or `size`."""
    from wanjax.adapters.jax.platform.device_memory import available_bytes, host_available_bytes, platform

    where = size.platform or (platform() if size.device is None or platform() != "cpu" else "gpu")
    device = available_bytes() if size.device is None else size.device
    host = host_available_bytes() if size.host is None else size.host
    return plan_memory(work, platform=where, available=device, host_available=host)
