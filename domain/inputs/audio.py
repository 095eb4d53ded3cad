"""Audio inputs: speech for audio-driven modes (Wan 2.2 S2V reads it with wav2vec2 at 16 kHz)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import numpy as np

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs.kinds import InputKind

MAX_AUDIO_SECONDS = 600.0
"""An audio input's length at most by default: ten minutes, far past any clip count a run makes."""


@attrs.frozen
class AudioKind(InputKind):
    """A sound file (wav, mp3, flac) read as mono float32 samples [N] at `sample_rate` Hz, at
    most `max_seconds` long. Probes are (seconds, the file's sample rate, its channels)."""

    sample_rate: int
    max_seconds: float = MAX_AUDIO_SECONDS
    reader: ClassVar[str] = "audio"

    def check(self, name: str, value: Any) -> None:
        if not isinstance(value, np.ndarray) or value.dtype != np.float32 or value.ndim != 1:
            given = f"<{type(value).__name__} {getattr(value, 'shape', None)}>"
            raise InvalidRequestError(f"{name}={given}: must be mono samples, a float32 array [N]")
        if not len(value):
            raise InvalidRequestError(f"{name}=<array (0,)>: is empty; give a sound file with some audio in it")

    def probe_of(self, value: Any) -> tuple[float, ...]:
        return (len(value) / self.sample_rate, self.sample_rate, 1)

    def samples(self, seconds: float) -> int:
        """The samples of `seconds` of audio at this kind's rate."""
        return round(seconds * self.sample_rate)
