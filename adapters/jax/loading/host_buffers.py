"""Host-side weight conversion: each tensor read once from its file mapping and written,
cast and laid out, straight into its final buffer.

Every byte is touched once: a tensor's view of the mapped file is cast into its slot of
a preallocated buffer (for scanned blocks, row `layer` of one stacked [L, ...] buffer),
so there is no intermediate fp32 copy and no per-layer rebuild of stacked arrays. numpy
releases the GIL in casts and copies, so a few threads convert in parallel.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import attrs
import numpy as np

# XLA's CPU client aliases host buffers aligned to 64 bytes instead of copying them, so a
# converted buffer becomes a CPU device array for free; page alignment also suits pinned
# host-to-device copies on accelerators.
ALIGNMENT = 4096
TRANSPOSE_ROWS = 16  # rows per block of a blocked 2-D transpose (measured best at 16-32)


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array whose data starts on an `ALIGNMENT` boundary.

    np.empty touches no pages, so the process's resident memory grows only as the
    buffer is written."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def copy_cast(dst: np.ndarray, src: np.ndarray, axes: tuple[int, ...] | None = None) -> None:
    """dst[...] = src.transpose(axes).astype(dst.dtype), in one pass over src.

    A plain strided transpose of a 2-D matrix runs at a quarter of the speed of a
    contiguous cast (every write misses cache); casting blocks of `TRANSPOSE_ROWS`
    contiguous rows and transposing each block keeps both sides in cache. Values are
    cast elementwise either way, so the result is bitwise the same as the naive order.
    """
    if axes is None or axes == tuple(range(src.ndim)):
        np.copyto(dst, src, casting="unsafe")
    elif axes == (1, 0):
        for row in range(0, src.shape[0], TRANSPOSE_ROWS):
            block = src[row : row + TRANSPOSE_ROWS]
            if block.dtype != dst.dtype:
                block = block.astype(dst.dtype)
            np.copyto(dst[:, row : row + TRANSPOSE_ROWS], block.T)
    else:
        np.copyto(dst, src.transpose(axes), casting="unsafe")


@attrs.frozen
class CopyJob:
    """One tensor into its destination: `read()` gives the source view, `done()` runs after."""

    read: Callable[[], np.ndarray]
    dst: np.ndarray
    axes: tuple[int, ...] | None
    done: Callable[[], None] | None = None

    def __call__(self) -> None:
        copy_cast(self.dst, self.read(), self.axes)
        if self.done is not None:
            self.done()


def default_workers() -> int:
    """Conversion threads: the CPUs this process may use, at most 8 (the copies are
    memory-bound, so more threads stop helping well before a large host's core count)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


def run_jobs(jobs: Sequence[CopyJob], workers: int | None = None) -> None:
    """Runs `jobs` on `workers` threads, in order as threads free up. The first failure
    cancels the jobs not yet started and is re-raised once the running ones finish."""
    workers = workers or default_workers()
    if workers == 1:
        for job in jobs:
            job()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="wanjax-convert") as pool:
        futures = [pool.submit(job) for job in jobs]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
