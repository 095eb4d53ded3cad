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
        return cls(
            batch=1,
            frames=(request.num_frames - 1) // vae.temporal_compression + 1,
            height=request.height // vae.spatial_compression,
            width=request.width // vae.spatial_compression,
            channels=vae.z_dim,
        )

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return (self.batch, self.frames, self.height, self.width, self.channels)

    def tokens(self, patch_size: tuple[int, int, int]) -> int:
        """Video tokens per row: the latent grid in (pt, ph, pw) patches."""
        pt, ph, pw = patch_size
        return (self.frames // pt) * (self.height // ph) * (self.width // pw)

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

    def from_diffusers_layout(self, latents: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(latents, (0, 2, 3, 4, 1)), dtype=np.float32)

    def to_diffusers_layout(self, latents: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(latents, (0, 4, 1, 2, 3)))
