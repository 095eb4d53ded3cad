"""The text encoder's weights checked before loading: a transformers UMT5 config that fits its
weights' headers (else transformers fails seconds later, unclearly). Its tokenizer is checked by
the backend that reads it (`application/builders.check_tokenizer`)."""

from __future__ import annotations

from wanjax.adapters.checkpoints.checkpoint import EncoderFiles
from wanjax.adapters.checkpoints.weights import Weights
from wanjax.domain.errors import CheckpointError
from wanjax.domain.umt5_shapes import umt5_mismatches, umt5_shapes


def check_text_encoder_files(files: EncoderFiles, weights: Weights) -> None:
    """Raises a CheckpointError naming the folder or config at fault. A replacing weights file in
    another naming (no config.json beside it) is checked when it is converted."""
    from wanjax.adapters.checkpoints.diffusers_folder import read_json  # which imports this module

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
