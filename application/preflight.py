"""One validation pass over everything a run will need that can be checked without weights.

It runs before anything loads, so bad settings fail in well under a second with the same
message they would have given seconds or minutes later: the device mesh against the devices
and the model, the attention kernel's availability, the VAE's runtime settings, the tokenizer
folder against the text encoder backend, and every LoRA's header against every expert's tensor
headers. The checkpoint's configs and headers
were checked when it was opened, each request's geometry and mesh split are the service's
(`GenerationService.check`), the output location is the CLI's (`outputs.check_output_path`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from wanjax.domain.attention_call import AttentionCall
from wanjax.domain.config import GenerationConfig
from wanjax.domain.errors import CheckpointError, InvalidRequestError
from wanjax.domain.lora import LoraSet, LoraSpec, loras_per_expert

REQUEST_LORA_FIELDS = ("loras", "loras_low")
"""A request's LoRA fields, by expert."""


def check_expert_loras(checkpoint: Any, expert: int, specs: tuple[LoraSpec, ...], checked: set[Any] | None = None) -> None:
    """Every LoRA file's header read and its deltas matched to the tensors of expert number
    `expert` by name and shape (the merge's own check, on headers and memory-mapped views), then its
    values read and found finite (files whose identity is in `checked` are not read again; the
    others join it); a CheckpointError naming the file and keys."""
    from wanjax.adapters.checkpoints.safetensors_file import FileIdentity
    from wanjax.adapters.lora import read_lora, with_loras

    if not specs:
        return
    with_loras(checkpoint.weights(checkpoint.experts[expert]), specs)
    checked = set() if checked is None else checked
    for spec in specs:
        identity = FileIdentity.of(Path(spec.path).expanduser())
        if identity not in checked:
            read_lora(spec.path).check_values()
            checked.add(identity)


def refuse_merging_into_quantized(checkpoint: Any, expert: int) -> None:
    """A CheckpointError where expert number `expert` is a quantized file (GGUF, scaled fp8): LoRAs merged
    at load would dequantize it whole; per request they are added to each layer's dequantized kernel."""
    from wanjax.adapters.checkpoints.gguf_file import PackedTensors

    weights = checkpoint.weights(checkpoint.experts[expert])
    if isinstance(weights, PackedTensors) and weights.block_kernel_bytes() is not None:
        raise CheckpointError(
            f"LoRAs merged at load (--lora) into a quantized transformer file ({checkpoint.experts[expert]}: GGUF "
            "or scaled fp8) are not supported: give them per request (--set request_loras=true and the "
            "request's loras), or use its bf16 release"
        )


class RequestLoraCheck:
    """A request's LoRAs (per expert) checked against the checkpoint before anything loads: an
    InvalidRequestError naming the request's field (`loras`, `loras_low`) and the problem. A file's
    values are read once while it stays unchanged (its size and modification time)."""

    def __init__(self, checkpoint: Any) -> None:
        self._checkpoint = checkpoint
        self._checked: set[Any] = set()

    def __call__(self, loras: LoraSet) -> None:
        for expert, (field, specs) in enumerate(zip(REQUEST_LORA_FIELDS, loras)):
            try:
                check_expert_loras(self._checkpoint, expert, specs, self._checked)
            except CheckpointError as err:
                raise InvalidRequestError(f"{field}: {err}") from None


class Preflight:
    """The checks of one config on one checkpoint (the service checks each batch's requests).

    `attention` and `vae_runtime` build the attention backend and the VAE's runtime (the
    container's providers: built once, kept for the run), whose construction refuses a kernel
    this machine cannot run and VAE settings that cannot work; `tokenizer` refuses a tokenizer
    folder the text encoder backend cannot build; `settings` is resolved."""

    def __init__(
        self,
        settings: GenerationConfig,
        checkpoint: Any,
        attention: Callable[[], Any],
        vae_runtime: Callable[[], Any],
        tokenizer: Callable[[], None],
    ) -> None:
        self._settings = settings
        self._checkpoint = checkpoint
        self._mesh = settings.mesh.shape
        self._attention = attention
        self._vae_runtime = vae_runtime
        self._tokenizer = tokenizer
        self._checked = False

    def check(self) -> None:
        """Raises what loading the model with this config would raise; runs once, later calls return."""
        if self._checked:
            return
        self._attention()
        self._check_mesh()
        self._vae_runtime()
        self._tokenizer()
        self._check_loras()
        self._checked = True

    def check_attention(self, call: AttentionCall) -> None:
        """Refuses, naming the kernel and the fix, a call the attention kernel does not honour (a
        frame-block-causal self-attention on cuDNN, Pallas or tokamax), before anything compiles."""
        self._attention().check(call)

    def _check_mesh(self) -> None:
        if self._mesh.is_single_device:
            return
        import jax

        self._mesh.check_devices(jax.device_count())
        heads = self._checkpoint.transformer_spec.num_attention_heads
        self._mesh.check_heads(heads, self._settings.mesh.context_parallel)

    def _check_loras(self) -> None:
        denoiser = self._settings.denoiser
        per_expert = loras_per_expert(len(self._checkpoint.experts), denoiser.loras, denoiser.loras_low)
        for expert, specs in enumerate(per_expert):
            if specs:
                refuse_merging_into_quantized(self._checkpoint, expert)
            check_expert_loras(self._checkpoint, expert, specs)
