"""Seeded random tensors streamed into a safetensors file, for checkpoints with random weights.

Values: normals of variance 1 / fan-in for matrices and kernels (fan-in: every axis after the
first, torch layout), ones for norm scales (1-D weights, the VAE's `gamma`), zeros for biases;
the activations of a deep random model stay in range, and no step time or memory depends on the
values. Each tensor is made in chunks of rows on worker threads (numpy's generator releases the
GIL), each chunk from its own seed, so the bytes depend on the seed alone; the file is written
in order as the chunks come, so a 28 GB expert never sits whole in memory.
"""

from __future__ import annotations

import json
import math
import os
import struct
import zlib
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import ml_dtypes
import numpy as np

SAFETENSORS_DTYPES = {"float32": "F32", "bfloat16": "BF16"}
CHUNK_ELEMENTS = 1 << 24  # 64 MiB of float32 per chunk


def write_random_safetensors(
    path: Path,
    shapes: Mapping[str, tuple[int, ...]],
    *,
    seed: int,
    dtype: str,
    stds: Mapping[str, float] = {},
    workers: int | None = None,
) -> None:
    """Writes tensors `shapes` (name -> torch-layout shape), in that order, in `dtype` ("float32" or
    "bfloat16"), to the safetensors file `path`, then syncs it to disk. `stds`: the standard
    deviation of named tensors where 1 / sqrt(fan-in) is not the model's."""
    if dtype not in SAFETENSORS_DTYPES:
        raise ValueError(f"dtype {dtype!r}: the random writer writes {', '.join(SAFETENSORS_DTYPES)}")
    itemsize = 4 if dtype == "float32" else 2
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = math.prod(shape) * itemsize
        header[name] = {"dtype": SAFETENSORS_DTYPES[dtype], "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data section starts 8-byte aligned, as the library writes it
    workers = workers or min(16, os.cpu_count() or 1)
    with path.open("wb") as file, ThreadPoolExecutor(workers, thread_name_prefix="wanjax-random") as pool:
        file.write(struct.pack("<Q", len(encoded)) + encoded)
        pending: deque[Future[np.ndarray]] = deque()
        for task in _chunks(shapes, seed):
            pending.append(pool.submit(_chunk_values, *task, dtype, stds.get(task[0])))
            if len(pending) >= 2 * workers:
                file.write(pending.popleft().result().tobytes())
        while pending:
            file.write(pending.popleft().result().tobytes())
        file.flush()
        os.fsync(file.fileno())


def _chunks(shapes: Mapping[str, tuple[int, ...]], seed: int) -> Iterator[tuple[str, tuple[int, ...], int, int, int]]:
    """(name, shape, chunk index, elements, seed) of every chunk, in file order."""
    for name, shape in shapes.items():
        total = math.prod(shape)
        row = math.prod(shape[1:]) if len(shape) > 1 else total
        per_chunk = max(1, CHUNK_ELEMENTS // max(row, 1)) * row
        for index, start in enumerate(range(0, total, per_chunk)):
            yield name, shape, index, min(per_chunk, total - start), seed


def _chunk_values(
    name: str, shape: tuple[int, ...], index: int, count: int, seed: int, dtype: str, std: float | None
) -> np.ndarray:
    if name.endswith("bias"):
        values = np.zeros(count, np.float32)
    elif len(shape) == 1 or name.endswith("gamma"):
        values = np.ones(count, np.float32)
    else:
        generator = np.random.default_rng([seed, zlib.crc32(name.encode()), index])
        values = generator.standard_normal(count, dtype=np.float32)
        values *= np.float32(std if std is not None else 1.0 / math.sqrt(math.prod(shape[1:])))
    if dtype == "float32":
        return values
    return (values.view(np.uint32) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)  # truncated to bf16
