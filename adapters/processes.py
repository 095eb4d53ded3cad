"""Whether the process that left a temporary file or folder behind still runs.

Temporary names carry their writer's host and process id (`...-HOST-PID`), so a later run
can remove what a killed one left: only its own host's, and only where that process ended.
"""

from __future__ import annotations

import os
import socket


def owner_tag() -> str:
    """`HOST-PID` of this process, for the names of its temporary files and folders."""
    return f"{socket.gethostname()}-{os.getpid()}"


def owner_ended(host: str | None, pid: int) -> bool:
    """Whether the process `pid` of `host` (None: this host, for names made before hosts were
    named) has ended. Another host's processes cannot be asked about: they count as running."""
    return host in (None, socket.gethostname()) and not process_is_running(pid)


def process_is_running(pid: int) -> bool:
    """Whether a process with this id runs on this host (one of another user counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, OSError):
        return False
    return True
