"""LoRA safetensors files, in the key styles Wan users have, read into deltas on diffusers tensors.

Key styles (a file may use any mix; each key is read on its own):

- diffusers / PEFT: `transformer.blocks.0.attn1.to_q.lora_A.weight` / `.lora_B.weight`
  (optional `.lora_B.bias`), with or without the `transformer.` (or PEFT's
  `base_model.model.`) prefix; alpha from the file's `lora_adapter_metadata`
  (`lora_alpha`, `use_rslora`), else alpha = rank.
- original Wan / ComfyUI, also LightX2V and Lightning: `diffusion_model.` + original
  module names, `blocks.0.self_attn.q.lora_down.weight` / `.lora_up.weight` (or
  `lora_A` / `lora_B`) with an optional `.alpha`; full deltas `.diff` (weight), `.diff_b`
  (bias) and `blocks.N.diff_m` / `head.diff_m` (modulation), as LightX2V's extractor
  writes them. Bare original names (no prefix) are read the same way.
- kohya / musubi-tuner: `lora_unet_blocks_0_self_attn_q.lora_down.weight` + `.alpha`.

A low-rank pair adds factor * up @ down with factor = alpha / rank (1 without alpha);
a full delta adds itself. Keys that fit none of this, and incomplete pairs, are a
CheckpointError listing them: nothing is skipped silently.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import attrs
import numpy as np

from wanjax.adapters.checkpoints.safetensors_file import SafetensorsFile
from wanjax.adapters.checkpoints.wan_names import diffusers_module, diffusers_parameter, original_from_kohya
from wanjax.domain.errors import CheckpointError

PEFT_METADATA_KEY = "lora_adapter_metadata"  # where diffusers' save_lora_weights puts LoraConfig
_PREFIXES = (("diffusion_model.", "original"), ("lora_unet_", "kohya"),
             ("transformer.", "diffusers"), ("base_model.model.", "diffusers"))  # fmt: skip
_ROLES = (
    (".lora_down.weight", "down"), (".lora_A.weight", "down"),
    (".lora_up.weight", "up"), (".lora_B.weight", "up"), (".lora_B.bias", "up_bias"),
    (".alpha", "alpha"), (".diff_b", "diff_b"), (".diff_m", "diff_m"), (".diff", "diff"),
)  # fmt: skip
_STYLES_HINT = (
    "supported key styles: diffusers/PEFT (transformer.blocks.0.attn1.to_q.lora_A.weight), "
    "original/ComfyUI/LightX2V (diffusion_model.blocks.0.self_attn.q.lora_down.weight, .alpha, "
    ".diff, .diff_b, .diff_m), kohya (lora_unet_blocks_0_self_attn_q.lora_down.weight)"
)


@attrs.frozen(eq=False)
class Delta:
    """One additive change to one diffusers tensor: factor * up @ down, or (down None) factor * up."""

    target: str
    keys: tuple[str, ...]  # the file's keys it is read from
    file: Path
    up: np.ndarray  # [out, rank] (or [out, rank, 1, ...] for convolutions), or the full delta
    down: np.ndarray | None = None  # [rank, in, ...]
    factor: float = 1.0

    def misfit(self, shape: tuple[int, ...]) -> str | None:
        """Why this delta cannot be added to a tensor of `shape`; None when it fits."""
        if self.down is None:
            return None if self.up.shape == tuple(shape) else f"delta {self.up.shape} vs tensor {tuple(shape)}"
        up, down = self.up.shape, self.down.shape
        fits = (
            len(up) >= 2 and up[1] == down[0] and all(d == 1 for d in up[2:])
            and (up[0], *down[1:]) == tuple(shape)
        )  # fmt: skip
        return None if fits else f"up {up} @ down {down} vs tensor {tuple(shape)}"

    def factors(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(up, down) as float32 arrays; a CheckpointError naming the file and keys if they hold NaN
        or infinite values."""
        up = np.asarray(self.up, np.float32)
        down = None if self.down is None else np.asarray(self.down, np.float32)
        if not all(np.isfinite(part).all() for part in (up, down) if part is not None):
            raise CheckpointError(
                f"LoRA {self.file}: {', '.join(repr(k) for k in self.keys)} hold NaN or infinite values; "
                "the file is corrupt: re-download or re-export it"
            )
        return up, down

    def dense(self, shape: tuple[int, ...]) -> np.ndarray:
        """The delta as a float32 array of `shape` (call `misfit` first); see `factors`."""
        up, down = self.factors()
        if down is None:
            return np.float32(self.factor) * up
        product = up.reshape(up.shape[0], -1) @ down.reshape(down.shape[0], -1)
        return (np.float32(self.factor) * product).reshape(shape)


@attrs.frozen(eq=False)
class LoraFile:
    path: Path
    deltas: tuple[Delta, ...]

    def check_values(self) -> None:
        """Every delta's factors read and found finite (the whole file is read; alphas were checked
        when it was opened); a CheckpointError naming the file and keys otherwise."""
        for delta in self.deltas:
            delta.factors()


def read_lora(path: Path) -> LoraFile:
    """Every delta of the LoRA file at `path`; CheckpointError lists every key it cannot place."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise CheckpointError(f"LoRA file not found: {path}")
    file = SafetensorsFile(path)
    if not file.names:
        raise CheckpointError(f"LoRA {path}: the file holds no tensors; re-download or re-export it, or drop it")
    groups: dict[tuple[str, str], dict[str, str]] = {}
    unmatched: list[str] = []
    repeated: list[str] = []
    for key in file.names:
        style, rest = _style(key)
        split = _split(rest)
        if split is None:
            unmatched.append(key)
            continue
        roles = groups.setdefault((style, split[0]), {})
        if split[1] in roles:  # e.g. both lora_down and lora_A: which one is meant?
            repeated.extend((roles[split[1]], key))
        roles[split[1]] = key
    scaling = _peft_scaling(file)
    deltas: list[Delta] = []
    incomplete: list[str] = []
    for (style, module), roles in groups.items():
        made = _group_deltas(file, style, module, roles, scaling)
        if made is None:
            incomplete.extend(roles.values())
        elif not all(delta.target for delta in made):
            unmatched.extend(roles.values())
        else:
            deltas.extend(made)
    _raise_if_any(path, unmatched, incomplete, repeated)
    return LoraFile(path=path, deltas=tuple(deltas))


def _style(key: str) -> tuple[str, str]:
    for prefix, style in _PREFIXES:
        if key.startswith(prefix):
            return style, key[len(prefix) :]
    return "bare", key


def _split(rest: str) -> tuple[str, str] | None:
    """(module in the file's naming, role); a modulation delta is a `diff` on `<owner>.modulation`."""
    for suffix, role in _ROLES:
        if rest.endswith(suffix) and len(rest) > len(suffix):
            module = rest[: -len(suffix)]
            return (f"{module}.modulation", "diff") if role == "diff_m" else (module, role)
    return None


def _target(style: str, module: str, bias: bool) -> str:
    """The diffusers tensor a module's weight (or bias) delta changes; "" when there is none."""
    if style == "kohya":
        module, style = original_from_kohya(module) or "", "original"
    if style == "bare" and (diffusers_module(module) or diffusers_parameter(module)):
        style = "original"
    if style != "original":
        return f"{module}.{'bias' if bias else 'weight'}"
    parameter = diffusers_parameter(module)
    if parameter is not None:
        return "" if bias else parameter
    base = diffusers_module(module)
    return "" if base is None else f"{base}.{'bias' if bias else 'weight'}"


def _group_deltas(
    file: SafetensorsFile, style: str, module: str, roles: dict[str, str], scaling: Callable[[int], float] | None
) -> list[Delta] | None:
    """The deltas of one module's keys; None when a low-rank pair (or its alpha) is incomplete."""
    weight, bias = _target(style, module, bias=False), _target(style, module, bias=True)
    deltas, factor = [], 1.0
    if roles.keys() & {"down", "up", "alpha"}:
        if not roles.keys() >= {"down", "up"}:
            return None
        down, up = file.tensor(roles["down"]), file.tensor(roles["up"])
        factor = _factor(file, roles.get("alpha"), int(down.shape[0]), scaling)
        keys = tuple(roles[r] for r in ("down", "up", "alpha") if r in roles)
        deltas.append(Delta(target=weight, keys=keys, file=file.path, up=up, down=down, factor=factor))
    for role, target, role_factor in (("up_bias", bias, factor), ("diff", weight, 1.0), ("diff_b", bias, 1.0)):
        if role in roles:
            tensor = file.tensor(roles[role])
            deltas.append(Delta(target=target, keys=(roles[role],), file=file.path, up=tensor, factor=role_factor))
    return deltas


def _factor(file: SafetensorsFile, alpha_key: str | None, rank: int, scaling: Callable[[int], float] | None) -> float:
    """alpha / rank from the module's `.alpha`, else from PEFT metadata, else 1."""
    if alpha_key is not None:
        alpha = np.asarray(file.tensor(alpha_key), np.float64)
        if alpha.size != 1 or not math.isfinite(alpha.item()):
            raise CheckpointError(f"LoRA {file.path}: {alpha_key!r} must hold one finite number, got {alpha!r}")
        return alpha.item() / rank
    return 1.0 if scaling is None else scaling(rank)


def _peft_scaling(file: SafetensorsFile) -> Callable[[int], float] | None:
    """rank -> PEFT's scaling from the LoraConfig diffusers saves in the header, if any."""
    raw = file.metadata.get(PEFT_METADATA_KEY)
    if not raw:
        return None
    try:
        config = {key.removeprefix("transformer."): value for key, value in json.loads(raw).items()}
    except (json.JSONDecodeError, AttributeError):
        raise CheckpointError(f"LoRA {file.path}: {PEFT_METADATA_KEY} in the header is not a JSON object") from None
    unsupported = [k for k in ("use_dora", "alpha_pattern", "rank_pattern") if config.get(k)]
    if unsupported:
        raise CheckpointError(f"LoRA {file.path}: PEFT options {unsupported} are not supported (plain LoRA only)")
    alpha = config.get("lora_alpha")
    if alpha is None:
        return None
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise CheckpointError(
            f"LoRA {file.path}: lora_alpha={alpha!r} in the header's {PEFT_METADATA_KEY} must be a finite number"
        )
    rslora = bool(config.get("use_rslora"))
    return lambda rank: float(alpha) / (math.sqrt(rank) if rslora else rank)


def _listing(keys: list[str], limit: int = 10) -> str:
    shown = ", ".join(repr(k) for k in sorted(keys)[:limit])
    return shown + (f", ... ({len(keys) - limit} more)" if len(keys) > limit else "")


def _raise_if_any(path: Path, unmatched: list[str], incomplete: list[str], repeated: list[str]) -> None:
    problems = []
    if unmatched:
        problems.append(f"{len(unmatched)} key(s) match no Wan transformer weight: {_listing(unmatched)}")
    if incomplete:
        problems.append(f"{len(incomplete)} key(s) of incomplete low-rank pairs (need both): {_listing(incomplete)}")
    if repeated:
        problems.append(f"{len(repeated)} key(s) give the same part of one module: {_listing(repeated)}")
    if problems:
        raise CheckpointError(f"LoRA {path}: " + "; ".join(problems) + f". {_STYLES_HINT}")
