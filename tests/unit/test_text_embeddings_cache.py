"""The prompt embeddings cache: a hit is the encoder's own output and builds no encoder."""

from __future__ import annotations

import numpy as np
from fakes import FakeTextEncoder

from wanjax.adapters.text_embeddings import CachedTextEncoder, encoder_identity


class Builds:
    """A `build` callable that counts its calls; every build encodes like the same FakeTextEncoder."""

    def __init__(self) -> None:
        self.encoders: list[FakeTextEncoder] = []

    def __call__(self) -> FakeTextEncoder:
        self.encoders.append(FakeTextEncoder())
        return self.encoders[-1]


def test_a_second_process_reads_the_embeddings_without_building_the_encoder(tmp_path):
    first_builds, later_builds = Builds(), Builds()
    first = CachedTextEncoder(first_builds, tmp_path, "encoder-a")
    expected = first.encode(["a fox", ""], 16)
    later = CachedTextEncoder(later_builds, tmp_path, "encoder-a")  # as a later run builds it

    later.prepare([["a fox", ""]], 16)
    got = later.encode(["a fox", ""], 16)

    assert len(first_builds.encoders) == 1 and later_builds.encoders == []
    assert got.dtype == expected.dtype and np.array_equal(got, expected)


class PaddedEncoder:
    """Encodes as UMT5 does past a prompt's tokens: rows 3 and on are +0.0; row 2 holds a -0.0."""

    def encode(self, prompts, max_sequence_length):
        embeddings = np.ones((len(prompts), max_sequence_length, 4), np.float32)
        embeddings[:, 3:] = 0.0
        embeddings[:, 2, 0] = -0.0  # a sign bit is data
        return embeddings


def test_only_rows_up_to_the_last_nonzero_one_are_stored_and_zeros_come_back(tmp_path):
    expected = CachedTextEncoder(PaddedEncoder, tmp_path, "encoder-a").encode(["a fox"], 16)
    (stored,) = tmp_path.iterdir()

    got = CachedTextEncoder(Builds(), tmp_path, "encoder-a").encode(["a fox"], 16)

    assert np.load(stored).shape == (1, 3, 4)
    assert got.shape == expected.shape and np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_another_batch_length_or_encoder_is_encoded(tmp_path):
    CachedTextEncoder(Builds(), tmp_path, "encoder-a").encode(["a fox", ""], 16)
    for prompts, length, identity in ((["", "a fox"], 16, "encoder-a"), (["a fox", ""], 8, "encoder-a"),
                                      (["a fox", ""], 16, "encoder-b")):  # fmt: skip
        builds = Builds()
        encoder = CachedTextEncoder(builds, tmp_path, identity)
        encoder.prepare([prompts], length)  # a miss builds the encoder while the rest loads
        assert len(builds.encoders) == 1
        encoder.encode(prompts, length)
        assert builds.encoders[0].calls == [prompts]


def test_identity_follows_the_files_and_settings(tmp_path):
    (tmp_path / "text_encoder").mkdir()
    weights = tmp_path / "text_encoder" / "model.safetensors"
    weights.write_bytes(b"1234")
    identity = encoder_identity([tmp_path / "text_encoder"], {"dtype": "float32"})

    assert encoder_identity([tmp_path / "text_encoder"], {"dtype": "bfloat16"}) != identity
    weights.write_bytes(b"12345")
    assert encoder_identity([tmp_path / "text_encoder"], {"dtype": "float32"}) != identity


def test_an_empty_or_cut_cache_file_is_encoded_again(tmp_path):
    expected = CachedTextEncoder(Builds(), tmp_path, "encoder-a").encode(["a fox"], 16)
    (stored,) = tmp_path.iterdir()
    for damaged in (b"", stored.read_bytes()[:100]):
        stored.write_bytes(damaged)
        builds = Builds()
        got = CachedTextEncoder(builds, tmp_path, "encoder-a").encode(["a fox"], 16)
        assert len(builds.encoders) == 1 and np.array_equal(got, expected)
