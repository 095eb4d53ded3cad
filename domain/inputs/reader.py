"""The port a kind of input's files are read through (adapters/media/readers.py registers one
per `InputKind.reader` name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import attrs

from wanjax.domain.inputs.kinds import InputKind


@attrs.frozen
class VideoSize:
    """The video a request makes, which inputs are read for: frames, height, width."""

    num_frames: int
    height: int
    width: int


class InputReader(Protocol):
    """Reads one kind of input's file: a path (the CLI) or a client's bytes (the HTTP API); `named`
    is what the entrypoint that asked calls it, for errors (InvalidRequestError naming the fix)."""

    def probe(self, kind: InputKind, source: Path | bytes, named: str, size: VideoSize) -> tuple[float, ...]:
        """What the file's headers say of it (a video's frames and size, a sound's length and rate),
        nothing decoded; an unreadable file is refused."""
        ...

    def check(self, kind: InputKind, probe: tuple[float, ...], named: str, size: VideoSize) -> None:
        """Refuses a file of `probe` that the mode cannot use (empty, too long), before decoding."""
        ...

    def decode(self, kind: InputKind, source: Path | bytes, named: str, size: VideoSize) -> Any:
        """The value the request holds: the file decoded as `kind` gives it for a video of `size`."""
        ...

    def stand_in(self, kind: InputKind, probe: tuple[float, ...], size: VideoSize) -> Any:
        """What `decode` gives of a file of `probe`, holding no data (a view of one zero): what
        checks and the memory plan read of an input not yet decoded."""
        ...
