"""Latent geometry: how a request's pixel size and frame count map to the latent grid."""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.requests import GenerationRequest
from wanjax.domain.specs import TransformerSpec, VaeSpec


@attrs.frozen
class LatentGeometry:
    """Latents are [B, F', H', W', C] inside wanjax; diffusers uses [B, C, F', H', W']."""

    batch: int
    frames: int
    height: int
    width: int
    channels: int

    @classmethod
    def of(cls, request: GenerationRequest, transformer: TransformerSpec, vae: VaeSpec) -> LatentGeometry:
        spatial = vae.spatial_compression * transformer.patch_size[1]
        for name, size in (("height", request.height), ("width", request.width)):
            if size % spatial:
                raise InvalidRequestError(
                    f"{name}={size}: this model needs a multiple of {spatial} (VAE x patch size)"
                )
        geometry = cls(
            batch=1,
            frames=(request.num_frames - 1) // vae.temporal_compression + 1,
            height=request.height // vae.spatial_compression,
            width=request.width // vae.spatial_compression,
            channels=vae.z_dim,
        )
        geometry._check_positions(request, transformer, vae)
        return geometry

    def _check_positions(self, request: GenerationRequest, transformer: TransformerSpec, vae: VaeSpec) -> None:
        """Each axis of the patch grid must fit the transformer's rotary position table."""
        limit = transformer.rope_max_seq_len
        pt, ph, pw = transformer.patch_size
        temporal, spatial = vae.temporal_compression, vae.spatial_compression
        for name, value, patches, most in (
            ("num_frames", request.num_frames, self.frames // pt, (limit * pt - 1) * temporal + 1),
            ("height", request.height, self.height // ph, limit * ph * spatial),
            ("width", request.width, self.width // pw, limit * pw * spatial),
        ):
            if patches > limit:
                raise InvalidRequestError(
                    f"{name}={value} makes {patches} positions along that axis; this model's rotary position "
                    f"table holds {limit} (rope_max_seq_len), so {name} can be at most {most}"
                )

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return (self.batch, self.frames, self.height, self.width, self.channels)

    def tokens(self, patch_size: tuple[int, int, int]) -> int:
        """Video tokens per row: the latent grid in (pt, ph, pw) patches."""
        pt, ph, pw = patch_size
        return (self.frames // pt) * (self.height // ph) * (self.width // pw)

    def sequence_tokens(self, transformer: TransformerSpec) -> int:
        """Tokens per row the blocks attend over: the video's, and those its extensions append
        (`ModelExtension.appended_tokens`: S2V's reference and motion tokens)."""
        appended = sum(e.appended_tokens(transformer, (self.height, self.width)) for e in transformer.extensions)
        return self.tokens(transformer.patch_size) + appended

    @property
    def diffusers_shape(self) -> tuple[int, int, int, int, int]:
        return (self.batch, self.channels, self.frames, self.height, self.width)

    def check_diffusers_latents(self, latents: np.ndarray) -> None:
        if tuple(latents.shape) != self.diffusers_shape:
            raise InvalidRequestError(
                f"initial latents have shape {tuple(latents.shape)}; this request needs "
                f"{self.diffusers_shape} ([B, C, F', H', W'] as diffusers lays them out)"
            )
        if not np.issubdtype(latents.dtype, np.floating):
            raise InvalidRequestError(f"initial latents have dtype {latents.dtype}; a float array is needed")
        bad = np.size(latents) - np.count_nonzero(np.isfinite(latents))
        if bad:
            raise InvalidRequestError(
                f"initial latents hold {bad} NaN or infinite value(s); noise must be finite (e.g. standard normal)"
            )

    def from_diffusers_layout(self, latents: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(latents, (0, 2, 3, 4, 1)), dtype=np.float32)

    def to_diffusers_layout(self, latents: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(latents, (0, 4, 1, 2, 3)))
