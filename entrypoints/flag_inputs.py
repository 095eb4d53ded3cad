"""The mode inputs the CLI's file flags name (`--image`, `--video`, `--pose-video`, ...), read by
the mode that takes those flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from wanjax.domain.config import GenerationConfig
from wanjax.domain.modes.base import ModelTraits


def flag_inputs(
    args: argparse.Namespace, config: GenerationConfig, model: Callable[[], ModelTraits], *, probed: bool = False
) -> dict[str, Any]:
    """The mode inputs (by input name) of the files the flags name: the mode that takes those flags
    (asking `model` where several do: `--video` is a VACE model's control video, else the source of
    video-to-video) reads each through its kind's reader (an unreadable one is an InvalidRequestError
    naming the flag). `probed` (`wanjax plan`): as stand-ins of what their headers say, nothing decoded."""
    from wanjax.adapters.media.readers import probed_input, read_input
    from wanjax.domain.inputs.fields import Entrypoint
    from wanjax.domain.inputs.reader import VideoSize
    from wanjax.domain.modes.registry import input_fields, mode_of_inputs

    given = {field.flag: value for field in input_fields() if (value := getattr(args, _dest(field.flag)))}
    if not given:
        return {}
    mode = mode_of_inputs(list(given), model, Entrypoint.CLI)
    mode.check_model(model())  # before the files are read
    size = VideoSize(config.sampling.num_frames, config.sampling.height, config.sampling.width)
    read = probed_input if probed else read_input
    return {field.name: read(field.kind, given[field.flag], field.flag, size) for field in mode.inputs
            if field.flag in given}  # fmt: skip


def _dest(flag: str) -> str:
    """argparse's attribute for `flag` (`--pose-video`: pose_video)."""
    return flag.removeprefix("--").replace("-", "_")
