"""The reference side of `wanjax bench --vs diffusers`: diffusers' WanTransformer3DModel with random
weights, the same architecture and shapes, timed per guided step on CUDA or the CPU; with --vae,
also its AutoencoderKLWan's decode of latents of the same shape, untiled and tiled.

The reference runs in a process of its own (`run_apart`), before JAX builds
anything: on a GPU each framework keeps the memory it once held in its own pool, so in one
process the second would see the first's peak as taken (a 14B model twice over).

A step is the transformer forward on the guidance batch plus the guidance combination, as
diffusers' WanPipeline runs it (its scheduler update is left out: elementwise, negligible).
The tuned baseline is the same model under `torch.compile` (inductor, its default mode), the
way PyTorch users deploy it; its first call (tracing, code generation and one step) is reported
apart from the steps.
diffusers is a test dependency, imported only here and only when asked for.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

import attrs
import torch

from wanjax.domain.bench import DiffusersSteps
from wanjax.domain.errors import ConfigError
from wanjax.domain.specs import TransformerSpec, VaeSpec

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ATTENTION_KERNEL = re.compile(r"flash|fmha|sdpa|attention|efficient", re.IGNORECASE)
T = TypeVar("T")


def require_diffusers() -> None:
    """Checked before any work, so a missing package fails at once."""
    if importlib.util.find_spec("diffusers") is None:
        raise ConfigError("--vs diffusers needs the diffusers package: pip install diffusers")


def torch_device(jax_platform: str) -> str:
    """Where diffusers runs beside JAX on `jax_platform`: CUDA beside a GPU, the CPU beside the CPU."""
    if jax_platform == "cpu":
        return "cpu"
    if jax_platform == "gpu" and torch.cuda.is_available():
        return "cuda"
    raise ConfigError(
        f"--vs diffusers runs torch on the same kind of device; none here for JAX's {jax_platform!r} "
        "(torch has no TPU backend; on a GPU, install a CUDA build of torch)"
    )


def diffusers_config(spec: TransformerSpec | VaeSpec) -> dict[str, object]:
    """WanTransformer3DModel's (AutoencoderKLWan's) keyword arguments for `spec`, whose fields are
    diffusers' config keys; unset fields are left to diffusers' defaults (None too). A VAE's config
    also states its compression, which diffusers does not derive."""
    config = {
        k: list(v) if isinstance(v, tuple) else v
        for k, v in attrs.asdict(spec, recurse=False).items()
        if v is not None and k != "animate"
    }
    if isinstance(spec, TransformerSpec) and not spec.diffusion_forcing:
        del config["inject_sample_info"]  # SkyReels-V2's key, not WanTransformer3DModel's
    if isinstance(spec, TransformerSpec) and spec.animate is not None:
        animate = attrs.asdict(spec.animate)
        animate["motion_encoder_channel_sizes"] = {str(s): c for s, c in spec.animate.motion_encoder_channel_sizes}
        config.update(animate)
    if isinstance(spec, VaeSpec):
        config.update(scale_factor_spatial=spec.spatial_compression, scale_factor_temporal=spec.temporal_compression)
    return config


def transformer_class(spec: TransformerSpec) -> type[torch.nn.Module]:
    """diffusers' transformer class of `spec`: the VACE, Animate or SkyReels-V2 one where it is one, else
    WanTransformer3DModel."""
    import diffusers

    if spec.diffusion_forcing:
        return diffusers.SkyReelsV2Transformer3DModel
    if spec.is_vace:
        return diffusers.WanVACETransformer3DModel
    return diffusers.WanAnimateTransformer3DModel if spec.is_animate else diffusers.WanTransformer3DModel


def _random_model(spec: TransformerSpec, dtype: torch.dtype, device: str) -> torch.nn.Module:
    """Built in `dtype` directly on `device` (no fp32 copy first); the modules diffusers keeps in
    fp32 when it loads a checkpoint are cast back to fp32, as from_pretrained does."""
    config = diffusers_config(spec)
    model_class = transformer_class(spec)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = model_class(**config)
    finally:
        torch.set_default_dtype(default)
    keep = set(getattr(model, "_keep_in_fp32_modules", None) or ())
    for name, module in model.named_modules():
        if keep.intersection(name.split(".")):
            module.float()
    return model.eval()


def time_diffusers_steps(
    spec: TransformerSpec,
    latent_shape: tuple[int, ...],
    text_tokens: int,
    image_tokens: int,
    *,
    guidance_scale: float,
    dtype: str,
    device: str,
    steps: int,
    compile_backend: str | None = None,
) -> DiffusersSteps:
    """Guided steps on latents [B, F', H', W', C] (B = 2 under guidance), timed after one untimed
    step; with `compile_backend` ("inductor": tuned) the model runs under `torch.compile` and that
    first step's seconds are its compile time. Torch runs on the caller's threads (`run_apart` gives
    it as many as XLA's pool)."""
    torch.manual_seed(0)
    model = _random_model(spec, TORCH_DTYPES[dtype], device)
    if compile_backend is not None:
        model = torch.compile(model, backend=compile_backend)
    batch, frames, height, width, _ = latent_shape
    make = dict(device=device, dtype=TORCH_DTYPES[dtype])
    inputs = dict(
        hidden_states=torch.randn(batch, spec.in_channels, frames, height, width, **make),
        timestep=torch.full((batch,), 999.0, device=device),
        encoder_hidden_states=torch.randn(batch, text_tokens, spec.text_dim, **make),
        encoder_hidden_states_image=torch.randn(batch, image_tokens, spec.image_dim, **make) if image_tokens else None,
        return_dict=False,
    )
    if spec.is_vace:  # control latents as many frames as the video's
        inputs["control_hidden_states"] = torch.randn(batch, spec.vace_in_channels, frames, height, width, **make)

    def step() -> torch.Tensor:
        with torch.inference_mode():
            (velocity,) = model(**inputs)
            if batch == 1:  # no guidance
                return velocity
            conditional, unconditional = velocity.chunk(2)
            return unconditional + guidance_scale * (conditional - unconditional)

    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    first = time.perf_counter()
    step()
    synchronize()
    first = time.perf_counter() - first
    attention = _attention_in_use(step, device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize()
    seconds = (time.perf_counter() - start) / steps
    return DiffusersSteps(
        seconds_per_step=seconds, attention=attention, compile_seconds=None if compile_backend is None else first,
        compiled_with=compile_backend,
    )  # fmt: skip


def _attention_in_use(step: Callable[[], torch.Tensor], device: str) -> str:
    """diffusers' attention backend (DIFFUSERS_ATTN_BACKEND; `native` is torch's SDPA) and, on CUDA,
    the attention kernels one profiled step launched (SDPA picks flash, cuDNN or memory-efficient)."""
    from diffusers.utils.constants import DIFFUSERS_ATTN_BACKEND

    if device != "cuda":
        return f"{DIFFUSERS_ATTN_BACKEND} ({device})"
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        step()
        torch.cuda.synchronize()
    kernels = sorted({e.name for e in profile.events() if ATTENTION_KERNEL.search(e.name)})
    return f"{DIFFUSERS_ATTN_BACKEND}: {', '.join(k[:80] for k in kernels) or 'no attention kernel recognised'}"


def time_diffusers_decode(spec: VaeSpec, latent_shape: tuple[int, ...], *, tiled: bool, device: str) -> float:
    """Seconds of one `AutoencoderKLWan.decode` (random weights, float32) of random latents
    [B, F', H', W', z_dim], with diffusers' own tiling when `tiled`; no warm-up: eager torch has no compile."""
    from diffusers import AutoencoderKLWan

    torch.manual_seed(0)
    with torch.device(device):
        vae = AutoencoderKLWan(**diffusers_config(spec)).eval()
    if tiled:
        vae.enable_tiling()
    batch, frames, height, width, channels = latent_shape
    latents = torch.randn(batch, channels, frames, height, width, device=device)
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    start = time.perf_counter()
    with torch.inference_mode():
        vae.decode(latents)
    synchronize()
    return time.perf_counter() - start


def _all_cores() -> None:
    torch.set_num_threads(len(os.sched_getaffinity(0)))


def run_apart(fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """`fn(*args, **kwargs)` in a fresh (spawned) process, which returns all its memory on exit; its
    torch gets as many threads as XLA's pool (the cores this process may use). The caller's own
    torch threads stay as they are: its text encoder's sums depend on their number."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn, initializer=_all_cores) as pool:
        return pool.submit(fn, *args, **kwargs).result()
