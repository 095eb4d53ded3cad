"""The step caches as `--help` names them: each policy `cache_policy` takes, with its own keys,
read from the policy registry (domain/caching/registry.py), so a new policy appears here with no
change to the CLI."""

from __future__ import annotations

import textwrap

from wanjax.domain.caching.published import PUBLISHED
from wanjax.domain.caching.registry import REGISTRY
from wanjax.domain.caching.settings import POLICIES, policy_keys

WIDTH = 100


def cache_epilog() -> str:
    """The help's closing paragraph (for a raw-text formatter): every policy and its keys, each
    given with --set KEY=VALUE."""
    chosen = [policy for policy in POLICIES if policy != "none"]
    indent = max(len(policy) for policy in chosen) + 4
    lines = [
        *_wrapped("step caches (docs/caching.md): --set cache_policy=NAME, then any of its keys as --set KEY=VALUE, "
                  "e.g. --set cache_policy=dbcache --set Fn_compute_blocks=4 --set enable_taylorseer=true "
                  "--set taylorseer_order=2. NAME and its keys:", ""),
        *(line for policy in chosen for line in _wrapped(f"{policy:<{indent - 2}}{', '.join(policy_keys(policy))}",
                                                         "  ", " " * indent)),
    ]  # fmt: skip
    switches = [f"{name}=true" for name, policy in REGISTRY.items() if not policy.chosen_by_name]
    lines += _wrapped(f"Turned on by a key of its own, with cache_policy=none: {', '.join(switches)}. "
                      f"cache_model names a published calibration: {', '.join(PUBLISHED)}.", "")  # fmt: skip
    return "\n".join(lines)


def _wrapped(text: str, first: str, rest: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=first if rest is None else rest)
