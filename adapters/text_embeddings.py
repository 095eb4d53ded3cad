"""Prompt embeddings kept on disk, so that a later run with the same prompts skips the text encoder.

On a CPU, building the text encoder (importing torch and transformers, ~7 CPU seconds) is
most of a demo run; a run that repeats its prompts (a new seed, size or step count) reads
the embeddings back instead. They are the encoder's own float32 output, so the video is
the same byte for byte.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from wanjax.adapters.media.atomic import atomic_path
from wanjax.domain.ports import TextEncoder

# Packages whose version can change the embeddings: the model code, the tokenizer, the
# prompt cleaning (ftfy, when installed).
_PACKAGES = ("torch", "transformers", "tokenizers", "ftfy")


def encoder_identity(locations: Sequence[Path], settings: dict[str, object]) -> str:
    """What the embeddings depend on besides the prompts: every file of `locations` (folders or
    files), `settings` (dtype, compile) and the installed `_PACKAGES`.

    A file is its path, size and mtime. A package is its `__init__.py` likewise, which an
    upgrade rewrites: `importlib.metadata.version` would cost 0.1 s a package (it scans every
    installed distribution), and importing the package is what this cache saves."""
    paths = [path for location in map(Path, locations) for path in [location, *sorted(location.rglob("*"))]]
    files = [_stat(path) for path in paths if path.is_file()]
    packages = {}
    for package in _PACKAGES:
        spec = importlib.util.find_spec(package)  # finds, never imports
        packages[package] = _stat(Path(spec.origin)) if spec is not None and spec.origin else None
    return json.dumps({"files": files, "settings": settings, "packages": packages}, sort_keys=True)


def _stat(path: Path) -> list[object]:
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


class CachedTextEncoder:
    """A TextEncoder that reads each call's embeddings from `folder` when an earlier call with the
    same prompts (in the same order: a batch is one forward pass) and `identity` wrote them, and
    builds the encoder it wraps (`build`) only when something must be encoded."""

    def __init__(self, build: Callable[[], TextEncoder], folder: Path, identity: str) -> None:
        self._build = build
        self._folder = Path(folder)
        self._identity = identity
        self._encoder: TextEncoder | None = None
        self._building = threading.Lock()

    def prepare(self, batches: Sequence[Sequence[str]] | None, max_sequence_length: int) -> None:
        """Builds the wrapped encoder now unless every batch of `batches` is on disk (None: unknown
        batches, so build), so that its load can overlap other loading."""
        if batches is None or not all(self._path(b, max_sequence_length).is_file() for b in batches):
            self._encoder_once()

    def encode(self, prompts: Sequence[str], max_sequence_length: int) -> np.ndarray:
        path = self._path(prompts, max_sequence_length)
        try:
            stored = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):  # not there yet, or unreadable: encode it again
            pass
        else:
            padding = max_sequence_length - stored.shape[1]
            return np.pad(stored, ((0, 0), (0, padding), (0, 0)))
        embeddings = self._encoder_once().encode(prompts, max_sequence_length)
        # Rows past every prompt's tokens are +0.0 (the encoder zeroes them): only the rows up to
        # the last one with any bit set are stored (a 512-token real model row is 16 kB, a prompt
        # uses a few dozen), and zeros are padded back on reading.
        used = np.flatnonzero(embeddings.view(np.uint32).any(axis=(0, 2)))
        try:
            with atomic_path(path) as temporary, temporary.open("wb") as f:
                np.save(f, embeddings[:, : used[-1] + 1 if used.size else 0])
        except OSError:  # a cache that cannot be written only costs the next run an encode
            pass
        return embeddings

    def _encoder_once(self) -> TextEncoder:
        """The wrapped encoder, built by the first caller while concurrent ones wait."""
        with self._building:
            if self._encoder is None:
                self._encoder = self._build()
            return self._encoder

    def _path(self, prompts: Sequence[str], max_sequence_length: int) -> Path:
        # Input the wrapped encoder refuses (a bare string, no prompts) is never on disk: it is
        # only ever written after a successful encode.
        key = json.dumps([self._identity, list(prompts), max_sequence_length])
        return self._folder / f"{hashlib.sha256(key.encode()).hexdigest()}.npy"
