"""Multi-process start-up: `jax.distributed.initialize` from CLI flags or the environment.

One process runs per host (or, for tests, several on one machine); together they see
every device of the slice as one mesh. Each setting comes from its flag, else from
JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES or JAX_PROCESS_ID. With none of them set the
run is a plain single-process one and nothing is initialised.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from wanjax.domain.errors import ConfigError
from wanjax.domain.numbers import parse_whole, shown

ENVIRONMENT = {
    "coordinator_address": "JAX_COORDINATOR_ADDRESS",
    "num_processes": "JAX_NUM_PROCESSES",
    "process_id": "JAX_PROCESS_ID",
}


@attrs.frozen(kw_only=True)
class ProcessGroup:
    """Where the coordinator listens (host:port, served by process 0), how many processes, which one this is."""

    coordinator_address: str
    num_processes: int
    process_id: int

    def __attrs_post_init__(self) -> None:
        if self.num_processes < 1:
            raise ConfigError(f"num_processes={self.num_processes}: must be at least 1")
        if not 0 <= self.process_id < self.num_processes:
            raise ConfigError(
                f"process_id={self.process_id}: must be in [0, {self.num_processes}) "
                f"(num_processes={self.num_processes})"
            )
        host, sep, port = self.coordinator_address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(
                f"coordinator_address={self.coordinator_address!r}: expected HOST:PORT, e.g. 10.0.0.1:1234"
            )


def _integer(name: str, value: str | int) -> int:
    try:
        return value if isinstance(value, int) else parse_whole(value)
    except ValueError:
        raise ConfigError(f"{name}={shown(value)}: expected a whole number in digits 0-9") from None


def process_group(
    environ: Mapping[str, str],
    *,
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> ProcessGroup | None:
    """The process group the flags (first) and `environ` describe; None when neither names any setting.

    Naming some settings but not all is a ConfigError that lists the missing ones and where to set them.
    """
    given = {
        "coordinator_address": coordinator_address,
        "num_processes": num_processes,
        "process_id": process_id,
    }
    values = {key: environ.get(variable) if given[key] is None else given[key] for key, variable in ENVIRONMENT.items()}
    missing = [key for key, value in values.items() if value in (None, "")]
    if len(missing) == len(values):
        return None
    if missing:
        where = ", ".join(f"--{key.replace('_', '-')} or {ENVIRONMENT[key]}" for key in missing)
        raise ConfigError(f"multi-process run: missing {where}; set all three settings, or none for one process")
    return ProcessGroup(
        coordinator_address=str(values["coordinator_address"]),
        num_processes=_integer("num_processes", values["num_processes"]),
        process_id=_integer("process_id", values["process_id"]),
    )


def initialize(group: ProcessGroup) -> None:
    """Joins `group`; call before any other JAX use (it fixes the devices every process sees).

    CPU devices talk through gloo, without which cross-process CPU collectives fail.
    """
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=group.coordinator_address,
        num_processes=group.num_processes,
        process_id=group.process_id,
    )


def is_primary() -> bool:
    """Whether this is process 0, the one that writes outputs (True for a single process)."""
    import jax

    return jax.process_index() == 0
