"""S2V's speech features (adapters/torch/wav2vec2.py) against the official `AudioEncoder`
(wan/modules/s2v/audio_encoder.py: `extract_audio_feat(return_all_layers=True)` then
`get_audio_embed_bucket_fps`, as `WanS2V.encode_audio` calls them) on a tiny random wav2vec2 with
the release's 24 layers (25 hidden states) and a WAV whose length is no whole number of clips."""

from __future__ import annotations

import wave

import numpy as np
import pytest
import torch
from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2ForCTC

from official_wan import official_s2v_audio_encoder

from wanjax.adapters.torch.wav2vec2 import SAMPLE_RATE, Wav2Vec2SpeechEncoder, video_frame_features
from wanjax.domain.errors import InvalidRequestError

FPS = 16  # wan_shared_cfg.sample_fps


@pytest.fixture(scope="module")
def wav2vec2():
    torch.manual_seed(0)
    config = Wav2Vec2Config(
        hidden_size=8, num_hidden_layers=24, num_attention_heads=2, intermediate_size=8, conv_dim=(8,) * 7,
        num_conv_pos_embeddings=4, num_conv_pos_embedding_groups=2, vocab_size=4,
        do_stable_layer_norm=True, feat_extract_norm="layer",  # as wav2vec2-large-xlsr-53
    )  # fmt: skip
    return Wav2Vec2ForCTC(config).eval(), Wav2Vec2FeatureExtractor(do_normalize=True)


def official_encoder(model: Wav2Vec2ForCTC, extractor: Wav2Vec2FeatureExtractor):
    module = official_s2v_audio_encoder()
    encoder = object.__new__(module.AudioEncoder)  # its __init__ downloads; set what it would
    encoder.processor, encoder.model, encoder.video_rate = extractor, model, 30
    return encoder


def write_wav(path, samples: np.ndarray) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(samples.astype("<i2").tobytes())


@pytest.mark.parametrize("infer_frames", [8, 12])
def test_speech_features_match_the_official_audio_encoder(wav2vec2, tmp_path, infer_frames):
    model, extractor = wav2vec2
    pcm = (np.random.default_rng(0).standard_normal(int(1.3 * SAMPLE_RATE)) * 3000).astype(np.int16)
    write_wav(tmp_path / "speech.wav", pcm)
    official = official_encoder(model, extractor)
    with torch.no_grad():
        z = official.extract_audio_feat(str(tmp_path / "speech.wav"), return_all_layers=True)
        expected, clips = official.get_audio_embed_bucket_fps(z, fps=FPS, batch_frames=infer_frames, m=0)
    ours = Wav2Vec2SpeechEncoder(extractor, model.wav2vec2).encode(
        pcm.astype(np.float32) / 32768.0, infer_frames=infer_frames, fps=FPS
    )
    assert ours.clips == clips and ours.frames.shape == (clips * infer_frames, 25, 8)
    np.testing.assert_allclose(ours.frames, expected.numpy(), rtol=0, atol=1e-6)
    assert np.abs(ours.frames[-1]).max() == 0  # the last clip runs past the audio: zeros


def test_context_rows_match_the_official_bucketing(wav2vec2):
    """The official code's m (context rows either side), which WanS2V leaves at 0."""
    hidden = np.random.default_rng(1).standard_normal((25, 37, 8)).astype(np.float32)
    official = official_encoder(*wav2vec2)
    expected, clips = official.get_audio_embed_bucket_fps(torch.from_numpy(hidden), fps=FPS, batch_frames=8, m=2)
    ours = video_frame_features(hidden, infer_frames=8, fps=FPS, context=2)
    assert ours.clips == clips
    np.testing.assert_array_equal(ours.frames, expected.numpy())


def test_too_short_audio_is_refused_before_the_model_runs(wav2vec2):
    model, extractor = wav2vec2
    with pytest.raises(InvalidRequestError, match="at least 720 samples"):
        Wav2Vec2SpeechEncoder(extractor, model.wav2vec2).hidden_states(np.zeros(500, np.float32))
