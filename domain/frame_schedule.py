"""Diffusion Forcing's schedule: each latent frame of a window at its own noise level, step by step
(SkyReels-V2; diffusers' `generate_timestep_matrix`, which this follows number for number).

A frame's level is how far down the plan's timesteps it has come: 0 not started (the model sees it
at timestep 999), k in 1..N the plan's k-th timestep (t_{k-1}; the frame takes solver step k - 1 in
that iteration), N + 1 finished (timestep 0). Frames move in causal blocks of `causal_block_size`;
synchronously (`ar_step` 0) all blocks move together, asynchronously block b starts `ar_step`
iterations after block b - 1, so earlier blocks are cleaner when later ones are seen. The first
`prefix` frames are given (the previous window's last frames, an image's latents): finished from
the start, never updated, seen at timestep 0, or at `addnoise_condition` with that much noise mixed
in (a fresh draw each iteration) where it is set.
"""

from __future__ import annotations

import attrs
import numpy as np

from wanjax.domain.attention_call import FrameBlockCausal
from wanjax.domain.errors import InvalidRequestError

NOT_STARTED_TIMESTEP = 999
"""The timestep a frame that has not started is seen at (diffusers' template's first entry)."""


@attrs.frozen(eq=False)
class FrameSchedule:
    """The iterations of one window of `frames` latent frames under a `steps`-step plan.

    levels: [I, F] int, each frame's level in each iteration (module docstring).
    updated: [I, F] bool, the frames the solver moves in each iteration.
    """

    frames: int
    steps: int
    prefix: int
    causal_block_size: int
    addnoise_condition: float
    levels: np.ndarray
    updated: np.ndarray
    seed: int = 0
    """Of the noise mixed into the given frames (a draw per iteration)."""

    @property
    def iterations(self) -> int:
        return len(self.levels)

    def timesteps(self, plan_timesteps: np.ndarray) -> np.ndarray:
        """[I, F] float32: the timestep the model sees each frame at (the plan's, whole numbers as
        diffusers' template holds them; the given frames at `addnoise_condition` where it is set)."""
        template = np.concatenate([[NOT_STARTED_TIMESTEP], np.trunc(np.asarray(plan_timesteps)), [0]])
        seen = template[self.levels].astype(np.float32)
        if self.noised_prefix:
            seen[:, : self.prefix] = self.addnoise_condition
        return seen

    def solver_steps(self) -> np.ndarray:
        """[I, F] int: the plan step whose solver row each frame takes (meaningful where `updated`)."""
        return np.clip(self.levels - 1, 0, self.steps - 1)

    @property
    def noised_prefix(self) -> bool:
        """The given frames are seen with `addnoise_condition` noise mixed in."""
        return self.addnoise_condition > 0 and self.prefix > 0


def frame_schedule(
    frames: int,
    steps: int,
    *,
    ar_step: int,
    causal_block_size: int,
    prefix: int = 0,
    addnoise_condition: float = 0.0,
    seed: int = 0,
) -> FrameSchedule:
    """The schedule of a window of `frames` latent frames, the first `prefix` given."""
    if frames % causal_block_size:
        raise InvalidRequestError(
            f"a window of {frames} latent frames does not split into causal blocks of causal_block_size="
            f"{causal_block_size}: choose num_frames, base_num_frames and overlap_history whose latent frames "
            f"((n - 1) / 4 + 1) are multiples of {causal_block_size}, or causal_block_size=1"
        )
    blocks, past = frames // causal_block_size, steps + 1  # level `steps`: its last step taken
    row = np.zeros(blocks, dtype=np.int64)
    row[: prefix // causal_block_size] = past  # given: past the end, so never updated
    levels, updated = [], []
    while not np.all(row >= steps):
        new = np.zeros_like(row)
        for b in range(blocks):
            new[b] = row[b] + 1 if b == 0 or row[b - 1] >= steps else new[b - 1] - ar_step
        new = np.clip(new, 0, past)
        updated.append((new != row) & (new != past))
        levels.append(new)
        row = new
    spread = lambda rows: np.repeat(np.stack(rows), causal_block_size, axis=1)  # noqa: E731
    return FrameSchedule(
        frames=frames, steps=steps, prefix=prefix, causal_block_size=causal_block_size,
        addnoise_condition=float(addnoise_condition), levels=spread(levels), updated=spread(updated), seed=seed,
    )  # fmt: skip


def frame_blocks(causal_block_size: int) -> FrameBlockCausal | None:
    """The blocks' self-attention of causal blocks of this many latent frames: frame-block-causal for
    more than one (diffusers' SkyReels-V2 transformer masks nothing for one-frame blocks)."""
    return FrameBlockCausal(causal_block_size) if causal_block_size > 1 else None
