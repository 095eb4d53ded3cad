"""The registered input readers, one per `InputKind.reader` name (domain/inputs/reader.py), and
reading a mode input through its kind's: a new kind of input is its reader's module and one line
in READERS."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wanjax.adapters.media.audio_reader import AudioReader
from wanjax.adapters.media.pixel_reader import PixelReader
from wanjax.domain.inputs.kinds import InputKind
from wanjax.domain.inputs.reader import InputReader, VideoSize

READERS: dict[str, InputReader] = {
    "pixels": PixelReader(),
    "audio": AudioReader(),
}


def reader(kind: InputKind) -> InputReader:
    return READERS[kind.reader]


def probe_input(kind: InputKind, source: Path | bytes, named: str, size: VideoSize) -> tuple[float, ...]:
    """The probe of one file of an input of `kind`, checked (refused before decoding where it
    cannot serve); `named` is what the entrypoint calls the input."""
    probe = reader(kind).probe(kind, source, named, size)
    reader(kind).check(kind, probe, named, size)
    return probe


def read_input(kind: InputKind, given: Path | bytes | Sequence[Path], named: str, size: VideoSize) -> Any:
    """The value of an input of `kind` from its file (a path or a client's bytes; paths for a
    repeatable kind: a tuple of values, one per file), each probed and checked first."""
    read = lambda one: reader(kind).decode(kind, _checked(kind, one, named, size), named, size)  # noqa: E731
    return tuple(read(path) for path in given) if kind.repeatable else read(given)


def probed_input(kind: InputKind, given: Path | bytes | Sequence[Path], named: str, size: VideoSize) -> Any:
    """What `read_input` gives, as stand-ins of what the files' headers say: nothing decoded."""
    probed = lambda one: reader(kind).stand_in(kind, probe_input(kind, one, named, size), size)  # noqa: E731
    return tuple(probed(path) for path in given) if kind.repeatable else probed(given)


def stand_in(kind: InputKind, probe: Sequence[float], size: VideoSize) -> Any:
    """What `read_input` gives of a file of `probe` (a repeatable kind: of one file), holding no data."""
    value = reader(kind).stand_in(kind, tuple(probe), size)
    return (value,) if kind.repeatable else value


def _checked(kind: InputKind, source: Path | bytes, named: str, size: VideoSize) -> Path | bytes:
    probe_input(kind, source, named, size)
    return source
