"""The server's counters and latency histograms, written in the Prometheus text format (0.0.4)."""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Callable, Sequence

STEP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REQUEST_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class Histogram:
    """Cumulative buckets of observed seconds, with their sum and count."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self._bounds = tuple(buckets)
        self._counts = [0] * (len(self._bounds) + 1)  # the last one: above every bound
        self._sum = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, seconds)] += 1
        self._sum += seconds

    def lines(self, name: str) -> list[str]:
        lines, total = [], 0
        for bound, count in zip((*map(repr, self._bounds), "+Inf"), self._counts):
            total += count
            lines.append(f'{name}_bucket{{le="{bound}"}} {total}')
        return [*lines, f"{name}_sum {self._sum}", f"{name}_count {total}"]


class ServerMetrics:
    """What /metrics reports; every method may be called from any thread."""

    def __init__(self, queue_depth: Callable[[], int]) -> None:
        self._queue_depth = queue_depth
        self._lock = threading.Lock()
        self._outcomes: Counter[str] = Counter()
        self._batches = Counter[int]()
        self._steps = Histogram(STEP_BUCKETS)
        self._requests = Histogram(REQUEST_BUCKETS)

    def finished(self, outcome: str, seconds_since_accepted: float | None) -> None:
        with self._lock:
            self._outcomes[outcome] += 1
            if seconds_since_accepted is not None:
                self._requests.observe(seconds_since_accepted)

    def step(self, seconds: float) -> None:
        with self._lock:
            self._steps.observe(seconds)

    def batch(self, size: int) -> None:
        with self._lock:
            self._batches[size] += 1

    def text(self) -> str:
        with self._lock:
            lines = [
                "# HELP wanjax_queue_depth Jobs waiting in the queue.",
                "# TYPE wanjax_queue_depth gauge",
                f"wanjax_queue_depth {self._queue_depth()}",
                "# HELP wanjax_jobs_total Finished jobs by outcome.",
                "# TYPE wanjax_jobs_total counter",
                *(f'wanjax_jobs_total{{outcome="{o}"}} {self._outcomes[o]}' for o in ("succeeded", "failed", "cancelled")),
                "# HELP wanjax_batches_total Denoising runs by the number of jobs batched in them.",
                "# TYPE wanjax_batches_total counter",
                *(f'wanjax_batches_total{{size="{s}"}} {n}' for s, n in sorted(self._batches.items())),
                "# HELP wanjax_step_seconds Time of one denoising step (of the whole batch).",
                "# TYPE wanjax_step_seconds histogram",
                *self._steps.lines("wanjax_step_seconds"),
                "# HELP wanjax_request_seconds Time from a job's acceptance to its end.",
                "# TYPE wanjax_request_seconds histogram",
                *self._requests.lines("wanjax_request_seconds"),
            ]
        return "\n".join(lines) + "\n"
