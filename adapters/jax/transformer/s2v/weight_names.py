"""The name table of an S2V transformer's additions: the official `WanModel_S2V` tensor names
(diffusers has no S2V model yet, so these are also the names the loader sees: the official ->
diffusers renaming leaves them as they are) -> `S2VBranch` parameters under `root`.

    casual_audio_encoder.weights                                  [1, 25, 1, 1]
    casual_audio_encoder.encoder.{conv1_local,conv1_global,conv2,conv3}.conv.{weight,bias}
    casual_audio_encoder.encoder.{final_linear.*,padding_tokens}
    audio_injector.injector.{k}.{q,k,v,o}.*, .norm_q.weight, .norm_k.weight
    audio_injector.injector_adain_layers.{k}.linear.*             (enable_adain)
    frame_packer.{proj,proj_2x,proj_4x}.*
    cond_encoder.*, trainable_cond_mask.weight

The injectors' pre-norms and AdaLN norms have no weights.
"""

from __future__ import annotations

from wanjax.adapters.jax.transformer.animate.weight_names import CONV1D
from wanjax.adapters.jax.transformer.weight_names import (
    Entry,
    Path,
    Slot,
    linear_entries,
    patch_embedding_entries,
    stack_slots,
)
from wanjax.domain.s2v_spec import S2VSpec
from wanjax.domain.specs import TransformerSpec


def _audio_encoder_entries(s2v: S2VSpec, root: Path) -> list[Entry]:
    name, path = "casual_audio_encoder.encoder", (*root, "casual_audio_encoder", "encoder")
    convs = ("conv1_local", "conv1_global", "conv2", "conv3") if s2v.enable_adain else ("conv1_local", "conv2", "conv3")
    entries = [Entry("casual_audio_encoder.weights", (*root, "casual_audio_encoder", "weights"))]
    for conv in convs:
        entries += [
            Entry(f"{name}.{conv}.conv.weight", (*path, conv, "kernel"), CONV1D),
            Entry(f"{name}.{conv}.conv.bias", (*path, conv, "bias")),
        ]
    if s2v.enable_adain:
        entries += linear_entries(f"{name}.final_linear", (*path, "final_linear"))
    return [*entries, Entry(f"{name}.padding_tokens", (*path, "padding_tokens"))]


def _injector_entries() -> tuple[Entry, ...]:
    entries: list[Entry] = []
    for theirs, ours in (("q", "to_q"), ("k", "to_k"), ("v", "to_v"), ("o", "to_out")):
        entries += linear_entries(theirs, ("attention", ours))
    return (*entries, *(Entry(f"{norm}.weight", ("attention", norm, "scale")) for norm in ("norm_q", "norm_k")))


def s2v_slots(spec: TransformerSpec, s2v: S2VSpec, *, scan_layers: bool, root: Path = ("s2v",)) -> list[Slot]:
    """The S2V branch's slots, its parameters under `root` (the branch's path in the model)."""
    top = [
        *_audio_encoder_entries(s2v, root),
        *(e for proj in ("proj", "proj_2x", "proj_4x")
          for e in patch_embedding_entries(f"frame_packer.{proj}", (*root, "frame_packer", proj))),
        *patch_embedding_entries("cond_encoder", (*root, "cond_encoder")),
        Entry("trainable_cond_mask.weight", (*root, "trainable_cond_mask", "embedding")),
    ]  # fmt: skip
    slots = [Slot(e.name, e.path, None, e.to_jax) for e in top]
    count, injectors = s2v.injector_count(spec.num_layers), (*root, "audio_injector")
    slots += stack_slots("audio_injector.injector", injectors, _injector_entries(), count, scan_layers=scan_layers)
    if s2v.enable_adain:
        adain = tuple(linear_entries("linear", ("adain",)))
        slots += stack_slots("audio_injector.injector_adain_layers", injectors, adain, count, scan_layers=scan_layers)
    return slots
