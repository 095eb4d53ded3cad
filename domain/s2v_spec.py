"""What Wan 2.2 S2V (speech-to-video, the official `WanModel_S2V`) adds to a Wan transformer, as
architecture: its config.json keys, under their official names (diffusers has no S2V model yet).

The additions (docs/s2v.md lists them with where each input comes from):
- `casual_audio_encoder`: the wav2vec2 hidden states of every video frame, mixed over the
  encoder's layers by learnt weights, through three causal temporal convs to `num_audio_token`
  token streams (+ a padding token) per latent frame; with `enable_adain` also one global token;
- `audio_injector`: a cross-attention of each latent frame's video tokens over its audio tokens,
  after the blocks `audio_inject_layers` names (AdaLN by the global audio token when `enable_adain`);
- `frame_packer` (`enable_framepack`): the previous clip's motion latents patch-embedded at 1x,
  2x and 4x compression into extra tokens with negative frame positions;
- `cond_encoder`: the pose latents patch-embedded and added to the video tokens;
- `trainable_cond_mask`: a learnt vector per token kind (video, reference, motion);
- `zero_timestep`: reference and motion tokens modulated by timestep 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from wanjax.domain.errors import UnsupportedModelError

if TYPE_CHECKING:
    from wanjax.domain.specs import TransformerSpec  # the spec holds this one (`TransformerSpec.s2v`)

AUDIO_LAYERS = 25
"""wav2vec2 hidden states the audio encoder mixes: the feature projection's output and each of
the 24 transformer layers of wav2vec2-large (`CausalAudioEncoder` fixes num_layers=25)."""
ADAIN_MODE = "attn_norm"
FRAME_PACK_BUCKETS = (1, 2, 16)
"""Latent frames the frame packer reads at 1x, 2x and 4x compression, nearest first (its
`zip_frame_buckets`): the last 19 motion latents, which is 73 pixel frames' worth."""
MOTION_FRAMES = 73
"""Pixel frames of motion a clip continues from (wan/configs/wan_s2v_14B.py: transformer.motion_frames)."""
LATENT_MOTION_FRAMES = (MOTION_FRAMES + 3) // 4
"""Their latent frames, 19 (`WanS2V.generate`'s lat_motion_frames)."""
SAMPLE_FPS = 16
"""The frame rate the speech features align to (wan/configs/shared_config.py: sample_fps)."""
SPEECH_SAMPLE_RATE = 16_000
"""The official code loads every audio file at 16 kHz mono (librosa) for wav2vec2."""
DROP_FIRST_MOTION = True
"""wan/configs/wan_s2v_14B.py: drop_first_motion: the first clip has no motion tokens."""
DROP_MODES = ("drop", "padd")
FRAME_PACK_PATCHES = ((1, 2, 2), (2, 4, 4), (4, 8, 8))
"""The frame packer's patch per group, nearest first (`proj`, `proj_2x`, `proj_4x`)."""
FRAME_PACK_CHANNELS = 16
"""The frame packer's convs read 16 channels whatever the model's in_dim: the Wan 2.1 VAE's latents."""


def _as_layers(value: Any) -> Any:
    return tuple(value) if isinstance(value, (list, tuple)) else value


@attrs.frozen(kw_only=True)
class S2VSpec:
    """The S2V keys of a `WanModel_S2V` config.json (defaults: WanModel_S2V.__init__'s; the
    released S2V-14B sets audio_dim=1024, enable_adain, 12 inject layers, zero_timestep,
    enable_framepack with drop mode "padd", cond_dim=16)."""

    cond_dim: int = 0
    audio_dim: int = 5120
    num_audio_token: int = 4
    enable_adain: bool = False
    adain_mode: str = ADAIN_MODE
    audio_inject_layers: tuple[int, ...] = attrs.field(default=(0, 4, 8, 12, 16, 20, 24, 27), converter=_as_layers)
    zero_timestep: bool = False
    enable_motioner: bool = True
    add_last_motion: bool = True
    enable_framepack: bool = False
    framepack_drop_mode: str = "drop"

    def __attrs_post_init__(self) -> None:
        if self.cond_dim < 1:
            raise UnsupportedModelError(
                f"S2V transformer config: cond_dim={self.cond_dim}; WanModel_S2V.forward always adds the pose "
                "tokens of its cond_encoder, which only a cond_dim >= 1 builds (the release has 16)"
            )
        if self.enable_motioner or not self.enable_framepack:
            raise UnsupportedModelError(
                f"S2V transformer config: enable_motioner={self.enable_motioner}, enable_framepack="
                f"{self.enable_framepack}; wanjax runs the frame-pack motioner only (the released S2V-14B: "
                "enable_motioner false, enable_framepack true)"
            )
        if self.enable_adain and self.adain_mode != ADAIN_MODE:
            raise UnsupportedModelError(
                f"S2V transformer config: adain_mode={self.adain_mode!r}; only {ADAIN_MODE!r} (the release's) is "
                "supported: other modes build output layers that WanModel_S2V.forward never calls"
            )
        if self.framepack_drop_mode not in DROP_MODES:
            raise UnsupportedModelError(
                f"S2V transformer config: framepack_drop_mode={self.framepack_drop_mode!r}; must be one of {DROP_MODES}"
            )
        if any(not isinstance(i, int) or i < 0 for i in self.audio_inject_layers):
            raise UnsupportedModelError(
                f"S2V transformer config: audio_inject_layers={self.audio_inject_layers!r}; must be block indices >= 0"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> S2VSpec:
        """The S2V fields of a WanModel_S2V config.json (its defaults for those it leaves out)."""
        names = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in config.items() if k in names})

    def injector_of_block(self, num_layers: int) -> tuple[int, ...]:
        """Per block, the audio injector that runs after it (-1: none).

        As `AudioInjector_WAN` assigns them: walking the blocks in order, block i takes a new
        injector for every listed layer l whose name `transformer_blocks.{l}` is a substring of
        `transformer_blocks.{i}` (str(i) starts with str(l)), and layer l runs the last one it
        took. With the release's layers and 40 blocks that is one injector per listed block;
        listing 1 with 12 blocks would make blocks 1, 10 and 11 each take one for layer 1,
        of which only the last runs (after block 1)."""
        taken: dict[int, int] = {}
        count = 0
        for block in range(num_layers):
            for layer in self.audio_inject_layers:
                if str(block).startswith(str(layer)):
                    taken[layer] = count
                    count += 1
        return tuple(taken.get(block, -1) for block in range(num_layers))

    def injector_count(self, num_layers: int) -> int:
        """How many audio injectors (weights `audio_injector.injector.{k}`) a model of `num_layers` has."""
        layers = self.audio_inject_layers
        return sum(str(block).startswith(str(layer)) for block in range(num_layers) for layer in layers)


S2V_CONFIG_KEYS = ("audio_inject_layers", "enable_framepack", "num_audio_token")
"""Keys only a `WanModel_S2V` config.json has: a transformer config with one of them is S2V's."""


def s2v_parameters(spec: TransformerSpec, s2v: S2VSpec) -> int:
    """The parameters S2V adds to its base transformer, as the official model holds them: the
    audio encoder, the audio injectors (their AdaLN linears with `enable_adain`), the frame
    packer, the pose encoder and the token-kind vectors (2.01 B for the released 14B)."""
    d, a, streams = spec.inner_dim, s2v.audio_dim, s2v.num_audio_token
    audio = AUDIO_LAYERS + 3 * a * (d // 4 * streams) + d // 4 * streams  # layer weights, conv1_local
    audio += 3 * (d // 4) * (d // 2) + d // 2 + 3 * (d // 2) * d + d + d  # conv2, conv3, the padding token
    injector = 4 * (d * d + d) + 2 * d  # q, k, v, o and the q/k RMS norms
    if s2v.enable_adain:
        audio += 3 * a * (d // 4) + d // 4 + d * d + d  # conv1_global, final_linear
        injector += d * 2 * d + 2 * d  # the AdaLN linear
    frame_pack = sum(FRAME_PACK_CHANNELS * math.prod(patch) * d + d for patch in FRAME_PACK_PATCHES)
    pose = s2v.cond_dim * math.prod(spec.patch_size) * d + d
    return audio + s2v.injector_count(spec.num_layers) * injector + frame_pack + pose + 3 * d
