"""The text encoder's files checked before loading: a tokenizer to build, and a transformers
UMT5 config that fits its weights' headers (else transformers fails seconds later, unclearly)."""

from __future__ import annotations

from wanjax.adapters.checkpoints.checkpoint import EncoderFiles
from wanjax.adapters.checkpoints.weights import Weights
from wanjax.domain.errors import CheckpointError
from wanjax.domain.umt5_shapes import umt5_mismatches, umt5_shapes

TOKENIZER_FILES = ("tokenizer.json", "spiece.model")  # what transformers builds the UMT5 tokenizer from


def check_text_encoder_files(files: EncoderFiles, weights: Weights) -> None:
    """Raises a CheckpointError naming the folder or config at fault. A replacing weights file in
    another naming (no config.json beside it) is checked when it is converted."""
    from wanjax.adapters.checkpoints.diffusers_folder import read_json  # which imports this module

    folder = files.preprocessing
    if folder is not None and not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointError(
            f"{folder}: has none of {', '.join(TOKENIZER_FILES)}, so the UMT5 tokenizer cannot be built; "
            "re-download the checkpoint"
        )
    config_path = files.weights / "config.json"
    if not config_path.is_file() or "shared.weight" not in weights:
        return
    config = read_json(config_path, what="a transformers UMT5 encoder")
    try:
        names = [*umt5_shapes(config), f"encoder.block.{config['num_layers']}.layer.0.SelfAttention.q.weight"]
        problems = umt5_mismatches(config, {name: weights[name].shape for name in names if name in weights})
    except (KeyError, TypeError) as err:
        raise CheckpointError(f"{config_path}: not a UMT5 encoder config ({err!r} missing or malformed)") from None
    if problems:
        raise CheckpointError(
            f"{config_path} does not fit the weights beside it: {'; '.join(problems[:5])}; re-download the "
            "checkpoint (config and weights must come from the same model)"
        )
