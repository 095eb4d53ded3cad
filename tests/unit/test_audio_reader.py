"""The audio input's reader (wav, mp3, flac through PyAV), on its own: no mode takes audio yet (Wan
2.2 S2V will, as wav2vec2's 16 kHz mono). Files are written here with PyAV."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

from wanjax.adapters.media.readers import READERS, probe_input, probed_input, read_input, stand_in
from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs.audio import AudioKind
from wanjax.domain.inputs.reader import VideoSize

SPEECH = AudioKind(sample_rate=16_000)
SIZE = VideoSize(num_frames=5, height=32, width=48)  # what a video's inputs are read for: audio ignores it


def _write(path: Path, samples: np.ndarray, rate: int, codec: str) -> Path:
    """samples float32 [channels, N] in [-1, 1] -> a sound file of `codec` at `rate` Hz."""
    layout = "mono" if len(samples) == 1 else "stereo"
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        if not samples.shape[1]:  # no frame to encode: the container's headers alone
            out.start_encoding()
            return path
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(samples, np.float32), format="fltp", layout=layout)
        frame.sample_rate = rate
        for converted in av.AudioResampler(format=stream.codec_context.format.name, layout=layout, rate=rate).resample(frame):
            for packet in stream.encode(converted):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return path


def _tone(rate: int, seconds: float, hz: float = 440.0) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * hz * np.arange(round(rate * seconds)) / rate)).astype(np.float32)


@pytest.mark.parametrize("codec, suffix", [("pcm_s16le", "wav"), ("flac", "flac"), ("libmp3lame", "mp3")])
def test_each_format_is_probed_from_its_headers_and_decoded_to_mono_at_the_asked_rate(tmp_path, codec, suffix):
    left, right = _tone(44_100, 0.5), _tone(44_100, 0.5, hz=220.0)
    path = _write(tmp_path / f"speech.{suffix}", np.stack([left, right]), 44_100, codec)
    assert probe_input(SPEECH, path, "--audio", SIZE) == pytest.approx((0.5, 44_100, 2), abs=0.03)
    assert probe_input(SPEECH, path.read_bytes(), "audio", SIZE)[1:] == (44_100, 2)  # a client's bytes alike
    samples = read_input(SPEECH, path, "--audio", SIZE)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - 8_000) <= 0.03 * 16_000  # 0.5 s at 16 kHz (mp3: its encoder's padding)
    expected = (_tone(16_000, 0.5) + _tone(16_000, 0.5, hz=220.0)) / 2  # the channels' mean
    middle = slice(2_000, 6_000)  # away from the resampling filter's edges
    if suffix != "mp3":  # mp3 shifts by its encoder's delay
        np.testing.assert_allclose(samples[middle], expected[middle], atol=2e-3)
    assert np.abs(samples).max() == pytest.approx(np.abs(expected).max(), abs=0.05)


def test_a_file_at_the_asked_rate_is_not_resampled(tmp_path):
    wave = _tone(16_000, 0.25)
    path = _write(tmp_path / "speech.wav", wave[None], 16_000, "pcm_s16le")
    samples = read_input(SPEECH, path, "--audio", SIZE)
    pcm = np.frombuffer(path.read_bytes()[-2 * len(wave) :], np.int16)  # the file's samples, after its header
    np.testing.assert_array_equal(samples, pcm / np.float32(32768))


def test_a_stand_in_for_the_memory_plan_has_the_probed_length_and_holds_no_samples(tmp_path):
    path = _write(tmp_path / "speech.flac", _tone(22_050, 1.5)[None], 22_050, "flac")
    standing = probed_input(SPEECH, path, "--audio", SIZE)
    assert standing.shape == (24_000,) and standing.dtype == np.float32 and standing.strides == (0,)
    assert stand_in(SPEECH, (1.5, 22_050, 1), SIZE).shape == (24_000,)
    SPEECH.check("audio", standing)  # what the request holds: the kind accepts its stand-in
    assert SPEECH.probe_of(standing) == (1.5, 16_000, 1)


def test_the_reader_is_registered_by_the_kinds_reader_name():
    assert SPEECH.reader in READERS and not SPEECH.repeatable


def test_a_long_empty_undecodable_or_missing_file_is_refused_naming_the_input_and_the_fix(tmp_path):
    path = _write(tmp_path / "long.wav", _tone(8_000, 2.0)[None], 8_000, "pcm_s16le")
    with pytest.raises(InvalidRequestError, match=r"^--audio: the sound is 2.0 s long, past the 1 s .* cut it"):
        read_input(AudioKind(sample_rate=16_000, max_seconds=1.0), path, "--audio", SIZE)
    empty = _write(tmp_path / "empty.wav", np.zeros((1, 0), np.float32), 16_000, "pcm_s16le")
    with pytest.raises(InvalidRequestError, match=r"^audio: the sound file holds no audio; give one"):
        read_input(SPEECH, empty.read_bytes(), "audio", SIZE)
    with pytest.raises(InvalidRequestError, match=r"^audio is not a wav, mp3 or flac file; send the sound"):
        read_input(SPEECH, b"OggS" + bytes(64), "audio", SIZE)  # an ogg: no other demuxer sees a client's bytes
    broken = b"RIFF" + bytes(4) + b"WAVE" + bytes(40)
    with pytest.raises(InvalidRequestError, match=r"^audio is not a readable wav, mp3 or flac file .*; give one"):
        read_input(SPEECH, broken, "audio", SIZE)
    with pytest.raises(InvalidRequestError, match=r"^--audio .*missing.wav does not exist; give the path"):
        probe_input(SPEECH, tmp_path / "missing.wav", "--audio", SIZE)


@pytest.mark.parametrize(
    "value, message",
    [(np.zeros(4, np.float64), "float32"), (np.zeros((2, 4), np.float32), r"\[N\]"), (np.zeros(0, np.float32), "empty")],
)
def test_the_kind_checks_the_samples_a_request_holds(value, message):
    with pytest.raises(InvalidRequestError, match=message):
        SPEECH.check("audio", value)
