"""Write-then-rename, so a failed or interrupted write never leaves a half file at the target.

The temporary file is `.NAME.TOKEN.partial-HOST-PID` beside the target, TOKEN new for every write:
threads of one process writing the same target at once (two requests encoding the same prompt)
each write their own file, and the last rename wins whole. A run that fails or is
stopped by a signal removes its own; one killed outright (SIGKILL, power loss) cannot, so
every later write into the same folder removes the partial files of processes of this host
that no longer run.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from pathlib import Path

from wanjax.adapters.processes import owner_ended, owner_tag

_PARTIAL = re.compile(r"^\..+\.partial-(?:(?P<host>.+)-)?(?P<pid>\d+)$")  # no host: before hosts were named


@contextmanager
def atomic_path(target: Path) -> Iterator[Path]:
    """Yields a temporary path beside `target`; renames it onto `target` only on success.

    On any failure the temporary file is removed and the original error propagates: a
    failure to remove it (the folder became read-only) never hides the error that matters."""
    with atomic_paths([target]) as (temporary,):
        yield temporary


@contextmanager
def atomic_paths(
    targets: Sequence[Path], *, committing: Callable[[], AbstractContextManager[object]] = nullcontext
) -> Iterator[list[Path]]:
    """`atomic_path` for several files written together: a temporary path beside each target,
    all renamed onto their targets only once the block succeeded, inside `committing()` (which
    may refuse, or keep signals from interrupting the renames); on any failure every temporary is
    removed."""
    targets = [Path(target) for target in targets]
    for folder in dict.fromkeys(target.parent for target in targets):
        folder.mkdir(parents=True, exist_ok=True)
        remove_stale_partials(folder)
    tag = owner_tag()
    temporaries = [target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial-{tag}") for target in targets]
    try:
        yield temporaries
        with committing():
            for temporary, target in zip(temporaries, targets, strict=True):
                os.replace(temporary, target)
    except BaseException:
        for temporary in temporaries:
            with suppress(OSError):
                temporary.unlink(missing_ok=True)
        raise


def remove_stale_partials(folder: Path) -> list[Path]:
    """Removes the partial files in `folder` left by processes of this host that have ended;
    returns them. Another host's (a shared file system) and live processes' are kept."""
    removed = []
    with suppress(OSError):
        for path in Path(folder).iterdir():
            match = _PARTIAL.match(path.name)
            if match is None or not owner_ended(match["host"], int(match["pid"])):
                continue
            with suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed
