"""The reader of sound files (domain/inputs/audio.AudioKind): wav, mp3 and flac through PyAV.

Probe: (seconds, sample rate, channels) from the container's and stream's headers; where they
record no duration (some mp3), the packets' durations, demuxed, none decoded. Decode: every
frame, converted to float32 by FFmpeg's libswresample (PyAV's AudioResampler), resampled there
to the kind's rate where the file's differs (libswresample's default engine, a windowed-sinc
polyphase filter); a file already at that rate is converted only, not resampled. Channels are
then averaged to mono.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs.audio import AudioKind
from wanjax.domain.inputs.reader import VideoSize

FORMATS = "wav, mp3 or flac"


def client_format(data: bytes, named: str) -> str:
    """FFmpeg's demuxer for a client's bytes, by their first bytes: wav, flac or mp3 (no other
    demuxer sees them)."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:4] == b"fLaC":
        return "flac"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    raise InvalidRequestError(f"{named} is not a {FORMATS} file; send the sound as one of those")


class AudioReader:
    """Sound files. Errors name `named` (the CLI's flag or the HTTP field) and, for a path, the file."""

    def probe(self, kind: AudioKind, source: Path | bytes, named: str, size: VideoSize) -> tuple[float, int, int]:
        import av

        what = _what(source, named)
        try:
            with _opened(source, what) as container:
                stream = _stream(container, what)
                rate, channels = stream.codec_context.sample_rate, stream.codec_context.channels
                if stream.duration is not None:
                    seconds = float(stream.duration * stream.time_base)
                elif container.duration is not None:
                    seconds = container.duration / av.time_base
                else:
                    seconds = sum(float(p.duration * p.time_base) for p in container.demux(stream) if p.duration)
        except InvalidRequestError:
            raise
        except (av.FFmpegError, OSError, ValueError) as err:
            raise InvalidRequestError(f"{what} is not a readable {FORMATS} file ({err}); give one of those") from None
        return seconds, rate, channels

    def check(self, kind: AudioKind, probe: tuple[float, ...], named: str, size: VideoSize) -> None:
        seconds = probe[0]
        if seconds <= 0:
            raise InvalidRequestError(f"{named}: the sound file holds no audio; give one with the speech in it")
        if seconds > kind.max_seconds:
            raise InvalidRequestError(
                f"{named}: the sound is {seconds:.1f} s long, past the {kind.max_seconds:g} s this input takes; "
                f"cut it to at most that (e.g. ffmpeg -i IN -t {kind.max_seconds:g} OUT.wav)"
            )

    def decode(self, kind: AudioKind, source: Path | bytes, named: str, size: VideoSize) -> np.ndarray:
        """Mono float32 samples [N] at `kind.sample_rate`."""
        import av

        what = _what(source, named)
        chunks = []
        try:
            with _opened(source, what) as container:
                stream = _stream(container, what)
                layout = stream.codec_context.layout.name
                same = stream.codec_context.sample_rate == kind.sample_rate
                resampler = av.AudioResampler(format="fltp", layout=layout, rate=None if same else kind.sample_rate)
                for frame in container.decode(stream):
                    chunks += [converted.to_ndarray() for converted in resampler.resample(frame)]
                chunks += [converted.to_ndarray() for converted in resampler.resample(None)]  # its filter's tail
        except InvalidRequestError:
            raise
        except (av.FFmpegError, OSError, ValueError) as err:
            raise InvalidRequestError(f"{what} is not a readable {FORMATS} file ({err}); give one of those") from None
        samples = np.concatenate(chunks, axis=1).mean(axis=0) if chunks else np.zeros(0, np.float32)
        self.check(kind, (len(samples) / kind.sample_rate,), named, size)
        return samples.astype(np.float32)

    def stand_in(self, kind: AudioKind, probe: tuple[float, ...], size: VideoSize) -> Any:
        return np.broadcast_to(np.zeros(1, np.float32), (kind.samples(probe[0]),))


def _what(source: Path | bytes, named: str) -> str:
    return named if isinstance(source, bytes) else f"{named} {source}"


def _opened(source: Path | bytes, what: str) -> Any:
    import av

    if isinstance(source, bytes):
        return av.open(io.BytesIO(source), format=client_format(source, what), options={"protocol_whitelist": "none"})
    if not Path(source).is_file():
        raise InvalidRequestError(f"{what} does not exist; give the path of a {FORMATS} file")
    return av.open(str(source))


def _stream(container: Any, what: str) -> Any:
    if not container.streams.audio:
        raise InvalidRequestError(f"{what} holds no audio stream; give a {FORMATS} file")
    return container.streams.audio[0]
