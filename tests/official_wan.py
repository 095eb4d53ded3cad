"""The Wan team's own code (PyPI `wan22`, the Wan2.2 repository's `wan` package) on this CPU.

It is the reference of the official-sampler and official-checkpoint tests. Three things
stand between it and a CPU-only test run, and this module handles each:

- `wan/__init__.py` imports every pipeline, speech and animation included (librosa,
  decord, ...). `official_wan()` registers a bare `wan` package instead, so that only the
  submodules a test imports run; likewise a bare `wan.modules.animate`, whose `clip`
  (Wan 2.1 I2V's open-clip XLM-RoBERTa CLIP) is all the tests need of it.
- It imports torchvision for one call, `transforms.functional.to_tensor` (an image to a
  [C, H, W] float tensor in [0, 1]); the package registry has no CPU build of torchvision
  for this torch, so `official_wan()` registers a stand-in computing exactly that.
- Its attention is flash-attn's varlen kernel (CUDA, half precision). `exact_attention`
  computes the same function with torch's SDPA in the inputs' dtype, honouring the key
  lengths (padding) and query lengths, and replaces it in the transformer module.
- Its pipelines build on `cuda:N` in `__init__` and load real checkpoints; tests make them
  with `official_pipeline`, which skips `__init__` and sets the attributes `generate` reads.
- Wan 2.2 S2V's modules (`official_s2v()`) import from a bare `wan.modules.s2v`, whose
  `__init__` would import the audio encoder and through it librosa (not installed); that audio
  encoder (`official_s2v_audio_encoder()`) imports with a librosa stand-in that reads 16-bit mono
  WAVs at the rate asked for (no resampling).
- Wan 2.2 S2V's pipeline (`wan/speech2video.py`, `official_speech2video()`) imports with the
  librosa and decord stand-ins and torchvision's `transforms` (Resize, CenterCrop, ToTensor of a
  PIL image, as torchvision computes them: its reference image's fitting).
- Wan 2.2 Animate (`wan/animate.py`, imported by `official_animate()`) reads its preprocessed
  inputs with OpenCV (`cv2.imread`, and `cv2.resize` for the character's letterbox: OpenCV itself,
  opencv-python-headless of the test extras) and decord (`VideoReader`, not installed: while
  `wan/animate.py` imports, a stand-in decodes videos to RGB frames with PyAV). Its face adapter
  calls flash-attn's `flash_attn_func`, computed here by torch's SDPA.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image


def exact_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_lens: torch.Tensor | None = None,
    k_lens: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    softmax_scale: float | None = None,
    q_scale: float | None = None,
    causal: bool = False,
    window_size: tuple[int, int] = (-1, -1),
    deterministic: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    version: int | None = None,
) -> torch.Tensor:
    """`wan.modules.attention.flash_attention`'s function, exactly, in q's dtype.

    q [B, Lq, N, C], k and v [B, Lk, N, C]; keys at or past k_lens[b] get no weight, and
    output rows at or past q_lens[b] are zero (flash-attn drops them). `dtype` (the half
    type flash-attn casts to) is ignored: the tests run in float32.
    """
    if dropout_p or window_size != (-1, -1):
        raise NotImplementedError("the official inference path uses neither dropout nor windows")
    if q_scale is not None:
        q = q * q_scale
    batch, query_len, key_len = q.size(0), q.size(1), k.size(1)
    mask = None
    if k_lens is not None:
        mask = (torch.arange(key_len)[None, :] < k_lens[:, None].cpu())[:, None, None, :]
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
        attn_mask=mask, is_causal=causal, scale=softmax_scale,
    ).transpose(1, 2)  # fmt: skip
    if q_lens is not None:
        rows = torch.arange(query_len)[None, :] < q_lens[:, None].cpu()
        out = out * rows[:, :, None, None].to(out.dtype)
    assert out.shape[:2] == (batch, query_len)
    return out.type(q.dtype)


def flash_attn_by_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """flash-attn's `flash_attn_func` ([B, S, N, H] in and out, no mask), by torch's SDPA."""
    out = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)))
    return out.transpose(1, 2)


class OpenClipTransforms:
    """The open-clip preprocessing `CLIPModel.visual` reads the last step of: torchvision's
    Normalize with OpenAI CLIP's mean and std (what wan/modules/animate/clip.py builds)."""

    def __init__(self) -> None:
        from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

        mean, std = (torch.tensor(values).view(3, 1, 1) for values in (OPENAI_CLIP_MEAN, OPENAI_CLIP_STD))
        self.transforms = [lambda images: (images - mean) / std]


def _image_to_tensor(image: Image.Image) -> torch.Tensor:
    """torchvision's `to_tensor` for an 8-bit RGB image: [C, H, W] float32, values / 255."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(pixels).permute(2, 0, 1).contiguous()


_OFFICIAL_MODULES = (
    "wan.modules.model", "wan.modules.attention", "wan.modules.t5", "wan.modules.vae2_1",
    "wan.modules.vae2_2", "wan.utils.fm_solvers", "wan.utils.fm_solvers_unipc",
    "wan.text2video", "wan.image2video", "wan.textimage2video", "wan.modules.animate.clip",
)  # fmt: skip


@contextlib.contextmanager
def _stand_ins(package: str, modules: Sequence[types.ModuleType]) -> Iterator[None]:
    """`modules` (a stand-in for `package`, then its submodules) importable while the block runs.

    They are removed afterwards (the modules imported meanwhile keep their reference), so that
    diffusers and transformers never take them for the real package. Nothing is registered
    where `package` is installed.
    """
    if importlib.util.find_spec(package) is not None:
        yield
        return
    sys.modules.update({module.__name__: module for module in modules})
    try:
        yield
    finally:
        for module in modules:
            sys.modules.pop(module.__name__, None)


def _torchvision_stand_in() -> contextlib.AbstractContextManager[None]:
    """`torchvision.transforms.functional.to_tensor`."""
    torchvision = types.ModuleType("torchvision")
    transforms = types.ModuleType("torchvision.transforms")
    functional = types.ModuleType("torchvision.transforms.functional")
    functional.to_tensor = _image_to_tensor
    transforms.functional = functional
    torchvision.transforms = transforms
    return _stand_ins("torchvision", (torchvision, transforms, functional))


class _DecodedFrames:
    def __init__(self, frames: np.ndarray) -> None:
        self._frames = frames

    def asnumpy(self) -> np.ndarray:
        return self._frames


class _VideoReader:
    """decord's `VideoReader`: a video's frames, `len()` and `get_batch(indices).asnumpy()`
    ([N, H, W, 3] uint8 RGB), decoded by PyAV."""

    def __init__(self, path: str) -> None:
        import av

        with av.open(str(Path(path))) as container:
            self._fps = float(container.streams.video[0].average_rate)
            self._frames = np.stack([frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)])

    def get_avg_fps(self) -> float:
        return self._fps

    def __len__(self) -> int:
        return len(self._frames)

    def get_batch(self, indices: Sequence[int]) -> _DecodedFrames:
        return _DecodedFrames(self._frames[list(indices)])


def _decord_stand_in() -> contextlib.AbstractContextManager[None]:
    """`decord.VideoReader`."""
    decord = types.ModuleType("decord")
    decord.VideoReader = _VideoReader
    return _stand_ins("decord", (decord,))


def official_animate() -> types.ModuleType:
    """`wan.animate` (WanAnimate and its modules) with exact attention, imported with the stand-ins."""
    official_wan()
    if "wan.animate" not in sys.modules:
        package = sys.modules["wan.modules.animate"]  # bare: what its __init__ exports, set here
        package.WanAnimateModel = importlib.import_module("wan.modules.animate.model_animate").WanAnimateModel
        package.CLIPModel = sys.modules["wan.modules.animate.clip"].CLIPModel
        importlib.import_module("wan.modules.animate.face_blocks").flash_attn_func = flash_attn_by_sdpa
        with _decord_stand_in():
            importlib.import_module("wan.animate")
    return sys.modules["wan.animate"]


def official_s2v() -> types.ModuleType:
    """`wan.modules.s2v` (WanModel_S2V and its modules) with exact attention, without running its
    `__init__` (which imports the audio encoder, and through it librosa)."""
    package = official_wan()
    if "wan.modules.s2v" not in sys.modules:
        _bare_package("wan.modules.s2v", [f"{package.__path__[0]}/modules/s2v"])
        for name in ("audio_utils", "motioner", "s2v_utils", "model_s2v"):
            importlib.import_module(f"wan.modules.s2v.{name}")
        sys.modules["wan.modules.s2v.model_s2v"].flash_attention = exact_attention
    return sys.modules["wan.modules.s2v"]


def _read_wav(path: str, sr: int) -> tuple[np.ndarray, int]:
    """librosa's `load(path, sr=sr)` for a 16-bit PCM mono WAV already at `sr` (no resampling)."""
    import wave

    with wave.open(str(path)) as audio:
        if audio.getframerate() != sr or audio.getsampwidth() != 2 or audio.getnchannels() != 1:
            raise NotImplementedError("the librosa stand-in reads 16-bit mono WAVs at the rate asked for")
        samples = np.frombuffer(audio.readframes(audio.getnframes()), np.int16)
    return samples.astype(np.float32) / 32768.0, sr


def official_s2v_audio_encoder() -> types.ModuleType:
    """`wan.modules.s2v.audio_encoder` (AudioEncoder: wav2vec2 features per video frame), imported
    with a librosa stand-in (`load` of a 16-bit mono WAV at 16 kHz)."""
    official_s2v()
    if "wan.modules.s2v.audio_encoder" not in sys.modules:
        librosa = types.ModuleType("librosa")
        librosa.load = _read_wav
        with _stand_ins("librosa", (librosa,)):
            importlib.import_module("wan.modules.s2v.audio_encoder")
    return sys.modules["wan.modules.s2v.audio_encoder"]


class _Resize:
    """torchvision's `transforms.Resize(size)` on a PIL image: the short side to `size` (the long
    side int(size * long / short)), PIL's bilinear filter (torchvision's own call for images)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, image: Image.Image | torch.Tensor) -> Image.Image | torch.Tensor:
        if isinstance(image, torch.Tensor):  # torchvision returns a tensor whose short side is the size as it is
            if min(image.shape[-2:]) != self.size:
                raise NotImplementedError("the Resize stand-in resizes PIL images only (S2V's reference)")
            return image
        w, h = image.size
        long = int(self.size * max(w, h) / min(w, h))
        return image.resize((self.size, long) if w <= h else (long, self.size), Image.Resampling.BILINEAR)


class _CenterCrop:
    """torchvision's `transforms.CenterCrop((h, w))` on a PIL image at least that large: the box at
    round((H - h) / 2), round((W - w) / 2)."""

    def __init__(self, size: tuple[int, int]) -> None:
        self.size = size

    def __call__(self, image: Image.Image | torch.Tensor) -> Image.Image | torch.Tensor:
        if isinstance(image, torch.Tensor):  # S2V's pose frames, already the video's size
            if tuple(image.shape[-2:]) != tuple(self.size):
                raise NotImplementedError("the CenterCrop stand-in crops tensors of the crop's size only")
            return image
        (h, w), (width, height) = self.size, image.size
        if h > height or w > width:
            raise NotImplementedError("the CenterCrop stand-in crops; it does not pad a smaller image")
        top, left = int(round((height - h) / 2.0)), int(round((width - w) / 2.0))
        return image.crop((left, top, left + w, top + h))


def official_speech2video() -> types.ModuleType:
    """`wan.speech2video` (WanS2V), imported with its audio encoder's librosa stand-in, decord's, and
    torchvision's `transforms` (Resize, CenterCrop and ToTensor of PIL images: what `generate`
    calls on its reference image) and `transforms.functional`."""
    official_s2v_audio_encoder()
    if "wan.speech2video" not in sys.modules:
        torchvision = types.ModuleType("torchvision")
        transforms = types.ModuleType("torchvision.transforms")
        functional = types.ModuleType("torchvision.transforms.functional")
        functional.to_tensor = _image_to_tensor
        transforms.functional, transforms.Resize, transforms.CenterCrop = functional, _Resize, _CenterCrop
        transforms.ToTensor = lambda: _image_to_tensor
        torchvision.transforms = transforms
        with _stand_ins("torchvision", (torchvision, transforms, functional)), _decord_stand_in():
            importlib.import_module("wan.speech2video")
    return sys.modules["wan.speech2video"]


def official_wan() -> types.ModuleType:
    """The `wan` package, without running its `__init__`, with exact attention swapped in.

    Imports the pipelines, models and schedulers the tests use (`_OFFICIAL_MODULES`).
    """
    if "wan" in sys.modules:
        return sys.modules["wan"]
    spec = importlib.util.find_spec("wan")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the official Wan code is missing: ./scripts/setup installs wan22")
    # What the official modules import from these, imported before the stand-in exists.
    importlib.import_module("diffusers.models.modeling_utils")
    importlib.import_module("transformers")
    package = _bare_package("wan", list(spec.submodule_search_locations))
    _bare_package("wan.modules.animate", [f"{package.__path__[0]}/modules/animate"])
    # t5.py evaluates torch.cuda.current_device() as a default argument at import.
    with _torchvision_stand_in(), mock.patch("torch.cuda.current_device", return_value=0):
        for name in _OFFICIAL_MODULES:
            importlib.import_module(name)
    for name in ("wan.modules.model", "wan.modules.attention", "wan.modules.animate.clip"):
        sys.modules[name].flash_attention = exact_attention
    return package


def _bare_package(name: str, path: list[str]) -> types.ModuleType:
    """A package `name` registered with its search path but without running its `__init__`."""
    package = types.ModuleType(name)
    package.__path__ = path
    package.__file__ = f"{path[0]}/__init__.py"
    sys.modules[name] = package
    return package


def official_pipeline(cls_path: str, **attributes: object) -> object:
    """An official pipeline object (e.g. "wan.text2video.WanT2V") on the CPU, never initialised.

    `generate` reads its components and settings from attributes; pass them (models,
    `text_encoder`, `vae`, `config` values) as keyword arguments. Defaults: CPU device,
    rank 0, no sequence parallelism, models kept on the CPU, `lightning` off (the PyPI
    build defaults it on, which skips the unconditional pass).
    """
    official_wan()
    module_name, _, cls_name = cls_path.rpartition(".")
    cls = getattr(importlib.import_module(module_name), cls_name)
    pipeline = object.__new__(cls)
    defaults = dict(device=torch.device("cpu"), rank=0, sp_size=1, t5_cpu=True, init_on_cpu=True, lightning=False)
    for name, value in {**defaults, **attributes}.items():
        setattr(pipeline, name, value)
    return pipeline
