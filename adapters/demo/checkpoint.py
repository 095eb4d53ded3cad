"""The built-in demo model: a tiny Wan 2.1 T2V checkpoint with random weights, in diffusers format.

Written once into the local cache, atomically (a temporary folder renamed into place), so
a fresh machine with no network can run the whole pipeline: the real loader reads the
same files and layout as a downloaded checkpoint. The weights are random: the videos it
makes are noise-like.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from wanjax.adapters.demo.random_checkpoint import demo_umt5_sizes, write_random_checkpoint
from wanjax.adapters.processes import owner_ended, owner_tag
from wanjax.domain.architectures import Architecture
from wanjax.domain.specs import TransformerSpec, VaeSpec

DEMO_NAME = "demo-v2"  # bump when the demo's architecture or writer changes
DEMO_SEED = 0
DEMO_TEXT_DIM = 32
DEMO_TRANSFORMER = TransformerSpec(
    num_attention_heads=4,
    attention_head_dim=16,
    ffn_dim=128,
    num_layers=2,
    text_dim=DEMO_TEXT_DIM,
    freq_dim=64,
)
DEMO_VAE = VaeSpec(base_dim=16, dim_mult=(1, 2, 2, 2), num_res_blocks=1)
DEMO_ARCHITECTURE = Architecture(transformer=DEMO_TRANSFORMER, vae=DEMO_VAE)


def default_cache_dir() -> Path:
    """$WANJAX_CACHE, else $XDG_CACHE_HOME/wanjax, else ~/.cache/wanjax."""
    if os.environ.get("WANJAX_CACHE"):
        return Path(os.environ["WANJAX_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wanjax"


def ensure_demo_checkpoint(cache_dir: Path | None = None) -> Path:
    """The demo checkpoint folder, written on first use."""
    return ensure_written((cache_dir or default_cache_dir()) / DEMO_NAME, write_demo_checkpoint)


def ensure_written(target: Path, write: Callable[[Path], None], marker: str = "model_index.json") -> Path:
    """`target`, a folder that `write(folder)` fills (a checkpoint; `marker` is a file it always
    has), written on first use into a staging folder renamed into place (staging folders of
    `target` that killed writers left behind are removed first)."""
    if (target / marker).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(target.parent, target.name)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-{owner_tag()}-", dir=target.parent))
    try:
        write(staging)
        try:
            os.rename(staging, target)
        except OSError:  # another process finished first; its copy is identical
            if not (target / marker).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def remove_stale_staging(folder: Path, name: str) -> list[Path]:
    """Removes the staging folders of checkpoint `name` in `folder` whose writer (a process of
    this host) has ended; returns them."""
    pattern = re.compile(rf"^\.{re.escape(name)}-(?P<host>.+)-(?P<pid>\d+)-[^-]+$")
    stale = []
    for path in folder.iterdir():
        match = pattern.match(path.name)
        if match and path.is_dir() and owner_ended(match["host"], int(match["pid"])):
            shutil.rmtree(path, ignore_errors=True)
            stale.append(path)
    return stale


def write_demo_checkpoint(folder: Path, seed: int = DEMO_SEED) -> None:
    """Writes every component of the demo model into `folder` (same seed, same bytes)."""
    from wanjax.adapters.torch.demo_tokenizer import DEMO_VOCAB_SIZE

    write_random_checkpoint(folder, DEMO_ARCHITECTURE, demo_umt5_sizes(DEMO_VOCAB_SIZE, DEMO_TEXT_DIM), seed=seed)
