"""Timing trace: named wall-clock spans, nested by dotted names, summarised at the end."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import attrs

SUMMARY_ORDER = ("load", "compile", "conditioning", "denoise", "vae_decode")


@attrs.define
class TimingTrace:
    """Seconds per span name; a span entered twice accumulates."""

    seconds: dict[str, float] = attrs.field(factory=dict)
    clock: Callable[[], float] = time.perf_counter

    @contextmanager
    def span(self, name: str) -> Iterator[None]:
        start = self.clock()
        try:
            yield
        finally:
            self.add(name, self.clock() - start)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def summary(self) -> str:
        """The TIMING SUMMARY block: the standard phases first, then any others."""
        names = [n for n in SUMMARY_ORDER if n in self.seconds]
        names += sorted(n for n in self.seconds if n not in SUMMARY_ORDER)
        rule = "=" * 44
        lines = [rule, "  TIMING SUMMARY", rule]
        lines += [f"  {name.replace('_', ' ').title():<24}{self.seconds[name]:>10.2f} s" for name in names]
        lines += [f"  {'Total':<24}{sum(self.seconds.values()):>10.2f} s", rule]
        return "\n".join(lines)
