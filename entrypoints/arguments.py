"""How the CLI reads its flags: numbers as the domain reads them (`domain/numbers.py`: digits 0-9,
finite, of a bounded length), within a range where the flag's own meaning gives one (a port);
ranges that are a request's or a setting's are checked where those are built. A flag that cannot
be read is refused in one line, with exit status 2."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

from wanjax.domain.errors import ConfigError
from wanjax.domain.numbers import parse_decimal, parse_whole
from wanjax.domain.sizes import parse_size


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose refusal is one line (argparse's prints the usage first, pages of it
    for `generate`), pointing at `--help`; its subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def whole_number(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse `type`: a whole number in digits 0-9, from `low` to `high` where given."""

    def whole(text: str) -> int:
        try:
            value = parse_whole(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return _in_range(value, low, high, "a whole number")

    return whole


def decimal_number(low: float | None = None, high: float | None = None, *, above: bool = False) -> Callable[[str], float]:
    """An argparse `type`: a finite number in digits 0-9, from `low` (or, with `above`, over it) to
    `high` where given."""

    def decimal(text: str) -> float:
        try:
            value = parse_decimal(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if above and low is not None and not value > low:
            raise argparse.ArgumentTypeError(f"{text!r}: give a number above {low:g}" + (f" and at most {high:g}" if high is not None else ""))
        return _in_range(value, None if above else low, high, "a number")

    return decimal


def memory_size(text: str) -> int:
    """An argparse `type`: a memory size (`24GiB`, `80GB`, bytes) in bytes (`sizes.parse_size`)."""
    try:
        return parse_size(text, what="size")
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _in_range(value: float, low: float | None, high: float | None, what: str) -> float:
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low:g} to {high:g}" if low is not None and high is not None else (
            f"of at least {low:g}" if low is not None else f"of at most {high:g}")  # fmt: skip
        raise argparse.ArgumentTypeError(f"{value:g}: give {what} {bounds}")
    return value
