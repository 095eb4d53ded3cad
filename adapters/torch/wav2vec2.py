"""S2V's speech features: transformers' wav2vec2 on a 16 kHz waveform, made into one row of hidden
states per video frame, as the official `wan/modules/s2v/audio_encoder.py` `AudioEncoder` makes
them (`extract_audio_feat(return_all_layers=True)` then `get_audio_embed_bucket_fps`).

1. The waveform is normalised by the checkpoint's feature extractor (zero mean, unit variance).
2. wav2vec2 gives 50 hidden states a second from each of its layers and its feature projection
   (25 for wav2vec2-large, the release's `wav2vec2-large-xlsr-53-english`), all kept.
3. They are linearly resampled (align_corners) to 30 a second: int(T / 50 * 30) of them.
4. Video frame i of `fps` takes the 30-a-second row nearest its time, round(i / fps * 30), with
   `context` rows either side `int(30 / fps)` apart (the official code uses none: m = 0) joined
   on the channels; frames past the audio's end get zeros. The audio gives
   `clips = int(T30 / (infer_frames * 30 / fps)) + 1` clips of `infer_frames` frames, the last
   padded with zeros: always one clip more than the whole clips the audio fills, as the official
   code counts them.

This is the only module that imports torch for audio; JAX-only runs never load it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from transformers import Wav2Vec2FeatureExtractor, Wav2Vec2Model

from wanjax.adapters.torch.pretrained import load_pretrained, require_folders, torch_dtype
from wanjax.domain.errors import InvalidRequestError

SAMPLE_RATE = 16_000
"""wav2vec2's input rate: the official code loads every audio file at 16 kHz (librosa)."""
HIDDEN_RATE = 50
"""wav2vec2's hidden states a second (one per 320 samples)."""
FEATURE_RATE = 30
"""The official `AudioEncoder.video_rate`: the hidden states are resampled to 30 a second first."""


class SpeechFeatures(NamedTuple):
    """Per video frame, every layer's hidden states: frames [clips * infer_frames, L, C] float32
    (clip k is rows k * infer_frames onwards), and how many clips the audio makes."""

    frames: np.ndarray
    clips: int


class Wav2Vec2SpeechEncoder:
    """A 16 kHz mono waveform -> `SpeechFeatures` (the module docstring's steps)."""

    def __init__(self, feature_extractor: Wav2Vec2FeatureExtractor, model: Wav2Vec2Model) -> None:
        self._feature_extractor = feature_extractor
        self._model = model.eval()

    @classmethod
    def from_folder(cls, folder: Path, *, dtype: str = "float32", device: str = "cpu") -> Wav2Vec2SpeechEncoder:
        """Loads the release's `wav2vec2-large-xlsr-53-english/` folder (a Wav2Vec2ForCTC checkpoint:
        its wav2vec2 part; the CTC head is unused), offline."""
        weights_dtype = torch_dtype(dtype, "audio encoder")
        require_folders({"wav2vec2 audio encoder": folder})
        extractor = load_pretrained(Wav2Vec2FeatureExtractor.from_pretrained, folder, "wav2vec2 feature extractor")
        model = load_pretrained(Wav2Vec2Model.from_pretrained, folder, "wav2vec2 audio encoder", dtype=weights_dtype)
        return cls(extractor, model.to(torch.device(device)))

    def encode(self, waveform: np.ndarray, *, infer_frames: int, fps: int, context: int = 0) -> SpeechFeatures:
        """waveform [N] float at 16 kHz -> `SpeechFeatures` for clips of `infer_frames` frames at `fps`."""
        return video_frame_features(self.hidden_states(waveform), infer_frames=infer_frames, fps=fps, context=context)

    def hidden_states(self, waveform: np.ndarray) -> np.ndarray:
        """waveform [N] -> every layer's hidden states at 30 a second [L, T30, C] float32."""
        waveform = np.asarray(waveform, np.float32)
        shortest = self._shortest_audio()
        if waveform.ndim != 1 or len(waveform) < shortest:
            raise InvalidRequestError(
                f"the speech audio must be one channel of at least {shortest} samples at {SAMPLE_RATE} Hz "
                f"({shortest / SAMPLE_RATE:.3f} s), got an array of shape {waveform.shape}: give a longer audio file"
            )
        inputs = self._feature_extractor(waveform, sampling_rate=SAMPLE_RATE, return_tensors="pt").input_values
        parameter = next(self._model.parameters())
        with torch.no_grad():
            out = self._model(inputs.to(parameter.device, parameter.dtype), output_hidden_states=True)
            hidden = torch.cat(out.hidden_states).float()  # [L, T50, C]
            frames = int(hidden.shape[1] / HIDDEN_RATE * FEATURE_RATE)
            hidden = F.interpolate(hidden.transpose(1, 2), size=frames, mode="linear", align_corners=True)
        return hidden.transpose(1, 2).cpu().numpy()

    def _shortest_audio(self) -> int:
        """The fewest samples that give two hidden states (one row at 30 a second)."""
        config = self._model.config
        samples = 2
        for kernel, stride in zip(reversed(config.conv_kernel), reversed(config.conv_stride), strict=True):
            samples = (samples - 1) * stride + kernel
        return samples


def video_frame_features(hidden: np.ndarray, *, infer_frames: int, fps: int, context: int = 0) -> SpeechFeatures:
    """hidden [L, T30, C] at 30 a second -> one row per video frame (the module docstring's step 4)."""
    if infer_frames < 1 or fps < 1:
        raise InvalidRequestError(f"infer_frames ({infer_frames}) and fps ({fps}) must be whole numbers >= 1")
    layers, available, channels = hidden.shape
    clips = int(available / (infer_frames * FEATURE_RATE / fps)) + 1
    count = clips * infer_frames
    padded = math.ceil(count / fps * FEATURE_RATE)  # the official index grid's length
    times = np.linspace(0, count / fps, count, endpoint=False)  # as the official get_sample_indices rounds them
    rows = np.clip(np.round(times * FEATURE_RATE).astype(int), 0, padded - 1)  # [count]
    stride = int(FEATURE_RATE / fps)
    window = np.clip(rows[:, None] + stride * np.arange(-context, context + 1), 0, available - 1)  # [count, 2m + 1]
    frames = hidden[:, window].transpose(1, 0, 2, 3).reshape(count, layers, -1)  # [count, L, (2m + 1) C]
    frames[rows >= available] = 0
    return SpeechFeatures(frames.astype(np.float32), clips)
