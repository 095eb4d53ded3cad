"""One server per output folder: an exclusive lock on the folder's `server.lock`, which names the
process holding it. The lock is the kernel's (flock), so it ends with the process, however it
ends: a server killed with SIGKILL leaves no stale lock."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import BinaryIO

from wanjax.domain.errors import StoreError

LOCK_FILE = "server.lock"


def lock_folder(folder: Path) -> BinaryIO:
    """Takes the lock on `folder` (made if missing) for as long as the returned file stays open;
    StoreError naming the process that holds it, or the folder when it cannot be written."""
    path = Path(folder) / LOCK_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.open("a+b")
    except OSError as err:
        raise StoreError(f"the output folder {folder} cannot be written ({err}); make it writable by this user "
                         "or give another --output-dir") from None  # fmt: skip
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().decode(errors="replace").strip() or "unknown"
        lock.close()
        raise StoreError(f"the output folder {folder} is in use by another wanjax serve (pid {holder}); stop it, "
                         "or give this one another --output-dir") from None  # fmt: skip
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n".encode())
    lock.flush()
    return lock
