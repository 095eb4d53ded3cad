"""How the CLI reads its flags: numbers as the domain reads them (`domain/numbers.py`: digits 0-9,
finite, of a bounded length), within a range where the flag's own meaning gives one (a port);
ranges that are a request's or a setting's are checked where those are built. A flag that cannot
be read is refused in one line, with exit status 2, as every other error the CLI names."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn, TypeVar

from wanjax.domain.errors import ConfigError
from wanjax.domain.numbers import parse_decimal, parse_whole
from wanjax.domain.sizes import parse_size

T = TypeVar("T", int, float)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose refusal is a ConfigError, which the CLI prints in one line as it does
    every other (argparse's prints the usage first, pages of it for `generate`), pointing at
    `--help`; its subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{message} (see {self.prog} --help)")


def whole_number(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An argparse `type`: a whole number in digits 0-9, from `low` to `high` where given."""

    def whole(text: str) -> int:
        return _in_range(_read(parse_whole, text), low, high)

    return whole


def decimal_number(low: float | None = None, high: float | None = None, *, above: bool = False) -> Callable[[str], float]:
    """An argparse `type`: a finite number in digits 0-9, from `low` (with `above`: over it) to `high`
    where given."""

    def decimal(text: str) -> float:
        return _in_range(_read(parse_decimal, text), low, high, above=above)

    return decimal


def memory_size(text: str) -> int:
    """An argparse `type`: a memory size (`24GiB`, `80GB`, bytes) in bytes (`sizes.parse_size`)."""
    try:
        return parse_size(text, what="size")
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _read(parse: Callable[[str], T], text: str) -> T:
    try:
        return parse(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _in_range(value: T, low: float | None, high: float | None, *, above: bool = False) -> T:
    under = low is not None and (value <= low if above else value < low)
    if under or (high is not None and value > high):
        bounds = [f"above {low:g}" if above else f"at least {low:g}"] if low is not None else []
        bounds += [f"at most {high:g}"] if high is not None else []
        raise argparse.ArgumentTypeError(f"{value:g}: give a number {' and '.join(bounds)}")
    return value
