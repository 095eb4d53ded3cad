"""The device check's stages, in the order they run (most telling first, the long ones last).

Each `run(out, smoke)` returns a JSON-able dict (status "passed" unless it says otherwise) and
raises on a failure, whose traceback lands in OUT/<stage>.log. With `smoke` every stage runs at
tiny sizes on the CPU with the same code paths and flags (bench stages whose command is then the
same, the demo with one timed step, run it once and share its record).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import vae_stage
from commands import SMOKE_STEPS, WANJAX, run
from e2e_stage import E2E
from fp8_stage import fp8_matmul_13b_480p_25, fp8_matmul_14b_720p_81, sage_13b_480p_25
from kernel_profile import around_matmuls, kernel_time
from quantized_stage import bench_14b_720p_81_gguf


# The README's "Determinism" section states these; the demo model, float32, final latents,
# max |device - cpu| / max |cpu|.
DEMO_TOLERANCE = {"highest": 1e-4, "default": 2e-2}
PARITY_TOLERANCE = 1e-5  # the CPU parity tests' bound, at matmul precision "highest"
REFERENCE_ROWS = 4096
KERNEL_ERROR = re.compile(r"cudnn|triton|pallas|mosaic|tokamax", re.IGNORECASE)


@dataclass(frozen=True)
class Stage:
    name: str
    budget_seconds: float  # killed past this
    least_seconds: float  # not started with less left than this
    run: Callable[[Path, bool], dict]


def environment(out: Path, smoke: bool) -> dict:
    """What ran: device, driver, versions, free memory, and every installed package's version."""
    import importlib.metadata as metadata

    import jax

    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    packages = {d.metadata["Name"].lower(): d.version for d in metadata.distributions()}
    wanted = ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "torch", "transformers",
              "diffusers", "tokamax", "numpy")
    return {
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": jax.device_count(),
        "memory_limit_bytes": stats.get("bytes_limit"),
        "memory_fraction": os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"),  # scripts/device-check sets it
        "memory_in_use_bytes": stats.get("bytes_in_use"),
        "nvidia_smi": _command(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.free,clocks.max.sm",
                                "--format=csv,noheader"]),
        "cudnn": _cudnn_version(),
        "python": sys.version.split()[0],
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "versions": {name: packages.get(name) for name in wanted},
        "packages": dict(sorted(packages.items())),
    }


def _command(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _cudnn_version() -> int | None:
    try:
        from jax._src.lib import cuda_versions

        return cuda_versions.cudnn_get_version() if cuda_versions is not None else None
    except (ImportError, AttributeError, RuntimeError):
        return None


def _cpu_name() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def attention_32760(out: Path, smoke: bool) -> dict:
    """Wan 2.1 1.3B at 832x480x81: 32760 tokens, 12 heads of 128."""
    return _attention(tokens=256 if smoke else 32760, heads=2 if smoke else 12)


def attention_75600(out: Path, smoke: bool) -> dict:
    """Wan 2.1 14B at 1280x720x81: 75600 tokens, 40 heads of 128."""
    return _attention(tokens=384 if smoke else 75600, heads=2 if smoke else 40)


def attention_sage_32760(out: Path, smoke: bool) -> dict:
    """`attention=blockwise_sage` and `pallas_sage` (int8 q k^T, fp8 p v; in XLA, in our Pallas kernel)
    at attention_32760's size, beside the bf16 kernels they would replace: blockwise and pallas (the
    same code in bf16) and cuDNN (auto's on a GPU). A kernel that cannot run here is recorded as failed."""
    return _attention(tokens=256 if smoke else 32760, heads=2 if smoke else 12,
                      backends=("blockwise_sage", "pallas_sage", "blockwise", "pallas", "cudnn"))  # fmt: skip


BF16_BACKENDS = ("cudnn", "pallas", "blockwise", "tokamax")


def _attention(tokens: int, heads: int, head_dim: int = 128, repeats: int = 5,
               backends: tuple[str, ...] = BF16_BACKENDS) -> dict:  # fmt: skip
    """Each of `backends` on bf16 q, k, v [1, T, N, H] (self-attention, S = T): median seconds of
    `repeats` runs after a warm-up, TFLOP/s, and max |out - ref| / max |ref| and the relative L2
    error against `xla` in float32 at precision "highest" on head 0's first 4096 queries (rows are
    independent, and their logits fit where all of them would not: 75600^2 fp32 logits take 23 GiB a head)."""
    import jax
    import jax.numpy as jnp

    from wanjax.adapters.jax.attention.xla import XlaAttention
    from wanjax.application import builders
    from wanjax.domain.attention_call import SELF, AttentionCall
    from wanjax.domain.errors import WanjaxError
    from wanjax.domain.flops import attention_flops

    backend = jax.default_backend()
    q, k, v = (jax.random.normal(key, (1, tokens, heads, head_dim), jnp.bfloat16)
               for key in jax.random.split(jax.random.key(0), 3))
    rows = min(tokens, REFERENCE_ROWS)
    with jax.default_matmul_precision("highest"):
        part = (q[:, :rows, :1], k[:, :, :1], v[:, :, :1])
        call = AttentionCall(kind=SELF)
        reference = np.asarray(jax.jit(XlaAttention(), static_argnums=3)(*(x.astype(jnp.float32) for x in part), call))
        reference = reference[:, :, 0]
    flops = attention_flops(1, tokens, tokens, heads * head_dim)
    makers = {
        "cudnn": builders.cudnn_attention,
        "pallas": builders.pallas_attention,
        "blockwise": builders.blockwise_attention,
        "tokamax": lambda: builders.tokamax_attention(backend),
        "blockwise_sage": builders.sage_attention,
        "pallas_sage": builders.pallas_sage_attention,
    }
    results: dict[str, dict] = {}
    for name in backends:
        make = makers[name]
        try:
            attend = jax.jit(functools.partial(make(), call=call))
            start = time.perf_counter()
            output = attend(q, k, v).block_until_ready()
            compile_seconds = time.perf_counter() - start
        except WanjaxError as error:
            results[name] = {"status": "unavailable", "reason": str(error)}
            continue
        except Exception as error:  # a kernel that fails to lower here is a finding, not the end of the stage
            results[name] = {"status": "failed", "error": f"{type(error).__name__}: {str(error)[:600]}"}
            continue
        seconds = _median_seconds(lambda: attend(q, k, v).block_until_ready(), repeats)
        head = np.asarray(output[:, :rows, 0].astype(jnp.float32))
        results[name] = {
            "seconds": seconds,
            "tflops": flops / seconds / 1e12,
            "max_relative_error": float(np.abs(head - reference).max() / np.abs(reference).max()),
            "relative_l2_error": float(np.linalg.norm(head - reference) / np.linalg.norm(reference)),
            "first_call_seconds": compile_seconds,
        }
    return {"tokens": tokens, "heads": heads, "head_dim": head_dim, "dtype": "bfloat16", "platform": backend,
            "flops_per_call": flops, "backends": results}


def _median_seconds(call: Callable[[], object], repeats: int) -> float:
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def demo_vs_cpu(out: Path, smoke: bool) -> dict:
    """The demo model in float32 on the default device (twice, and once at matmul precision
    "highest") against the same run on this host's CPU: final latents. Should the default
    attention fail on the device, the runs repeat with `blockwise` (plain XLA) and say so."""
    generate = [*WANJAX, "generate", "--prompt", "a red fox running through fresh snow", "--dtype", "float32",
                "--output-type", "latent", "--quiet", "--set", "text_encoder_backend=jax"]
    paths = {name: out / f"demo_{name}.npy" for name in ("device", "device_again", "device_highest", "cpu")}
    notes = {}
    try:
        run([*generate, "--out", str(paths["device"])])  # first alone: it writes the demo checkpoint
    except RuntimeError as error:
        notes["default_attention_error"] = str(error)[-2000:]
        generate += ["--set", "attention=blockwise"]
        run([*generate, "--out", str(paths["device"])])
    cpu = subprocess.Popen([*generate, "--out", str(paths["cpu"])], env={**os.environ, "JAX_PLATFORMS": "cpu"},
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run([*generate, "--out", str(paths["device_again"])])
    run([*generate, "--out", str(paths["device_highest"])], env={"JAX_DEFAULT_MATMUL_PRECISION": "highest"})
    _, errors = cpu.communicate()
    if cpu.returncode != 0:
        raise RuntimeError(f"the CPU run failed:\n{errors[-3000:]}")
    latents = {name: np.load(path) for name, path in paths.items()}
    cpu_latents = latents["cpu"]
    error = {name: _relative_error(latents[key], cpu_latents) for name, key in
             (("default", "device"), ("highest", "device_highest"))}
    passed = all(error[name] <= DEMO_TOLERANCE[name] for name in error)
    return {
        "status": "passed" if passed else "failed",
        "latent_shape": list(cpu_latents.shape),
        "relative_error_vs_cpu": error,
        "tolerance": DEMO_TOLERANCE,
        "device_runs_bitwise_equal": bool(np.array_equal(latents["device"], latents["device_again"])),
        **notes,
    }


def _relative_error(out: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(out.astype(np.float64) - reference).max() / np.abs(reference).max())


def diffusers_parity(out: Path, smoke: bool) -> dict:
    """A tiny diffusers WanTransformer3DModel (random, perturbed weights, save_pretrained) against
    the same weights loaded by wanjax on the default device, float32."""
    if importlib.util.find_spec("torch") is None:
        return {"status": "skipped", "reason": "needs torch (the smoke venv has none: no CPU build on PyPI)"}
    import diffusers
    import jax
    import jax.numpy as jnp
    import torch
    from flax import nnx
    from safetensors.numpy import load_file

    from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
    from wanjax.adapters.jax.transformer.weights import load_transformer
    from wanjax.domain.specs import TransformerSpec

    config = dict(num_attention_heads=2, attention_head_dim=16, in_channels=16, out_channels=16, text_dim=32,
                  freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=64)
    torch.manual_seed(0)
    model = diffusers.WanTransformer3DModel(**config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    folder = out / "parity_transformer"
    model.save_pretrained(folder)
    spec = TransformerSpec.from_diffusers_config(json.loads((folder / "config.json").read_text()))
    rng = np.random.default_rng(0)
    latents = rng.standard_normal((2, 3, 8, 8, 16), dtype=np.float32)  # [B, F, H, W, C]
    timestep = np.array([999.0, 500.5], np.float32)
    context = rng.standard_normal((2, 24, 32), dtype=np.float32)
    with torch.no_grad():
        (reference,) = model(torch.from_numpy(latents.transpose(0, 4, 1, 2, 3).copy()), torch.from_numpy(timestep),
                             torch.from_numpy(context), return_dict=False)
    reference = reference.numpy().transpose(0, 2, 3, 4, 1)
    tensors = load_file(folder / "diffusion_pytorch_model.safetensors")
    ours = load_transformer(spec, TransformerRuntime(dtype=jnp.float32, param_dtype=jnp.float32), tensors)
    forward = nnx.jit(lambda m, x, t, c: m(x, t, c))
    errors = {}
    for precision, scope in (("highest", jax.default_matmul_precision("highest")), ("default", nullcontext())):
        with scope:
            errors[precision] = _relative_error(np.asarray(forward(ours, latents, timestep, context)), reference)
    return {
        "status": "passed" if errors["highest"] <= PARITY_TOLERANCE else "failed",
        "device": jax.devices()[0].device_kind,
        "relative_error": errors,
        "tolerance_highest": PARITY_TOLERANCE,
    }


def _bench(name: str, model: str, size: tuple[int, int, int], steps: int, *, smoke: bool, out: Path,
           vs: str | None = "diffusers-compiled", vae: bool = False, sets: tuple[str, ...] = (), layers: int | None = None,
           extra: tuple[str, ...] = (), env: dict[str, str] | None = None) -> dict:
    """`wanjax bench` in its own process (`extra`: more of its flags, `env`: more of its
    environment); in the smoke run the demo model at its own small size."""
    width, height, frames = size
    steps = SMOKE_STEPS if smoke else steps
    argv = [*WANJAX, "bench", "--model", "demo" if smoke else model, "--steps", str(steps), "--json",
            str(out / f"{name}.json")]
    if not smoke:
        argv += ["--width", str(width), "--height", str(height), "--num-frames", str(frames)]
    if layers is not None and not smoke:
        argv += ["--layers", str(layers)]
    reason = None
    if vs is not None and importlib.util.find_spec("torch") is not None:
        argv += ["--vs", vs]
    elif vs is not None:
        reason = f"no --vs {vs}: needs torch (the smoke venv has none)"
    argv += ["--vae"] if vae else []
    argv += list(extra)
    for item in sets:
        argv += ["--set", item]
    notes = {"note": reason} if reason else {}
    if smoke and (earlier := _smoke_twin(out, name, argv)) is not None:
        record = json.loads((out / f"{earlier}.json").read_text())
        return {"command": " ".join(argv[2:]), **record, **notes, "same_as": earlier}
    for _ in range(3):  # the run, and at most two retries that each drop one failing part
        try:
            printed = run(argv, env)
            break
        except RuntimeError as error:
            text = str(error)
            if KERNEL_ERROR.search(text) and "RESOURCE_EXHAUSTED" not in text and "--attention" not in argv:
                notes["default_attention_error"] = text[-2000:]  # once more on plain XLA attention
                argv += ["--attention", "blockwise"]
            elif "--vs" in argv:  # keep wanjax's numbers even where the reference fails
                notes["diffusers_error"] = text[-2000:]
                at = argv.index("--vs")
                argv = argv[:at] + argv[at + 2 :]
            else:
                raise
    else:
        raise RuntimeError(f"{name}: every retry failed; see the notes: {notes}")
    record = json.loads((out / f"{name}.json").read_text())
    return {"command": " ".join(argv[2:]), "report": printed.strip().splitlines(), **record, **notes}


def _smoke_twin(out: Path, name: str, argv: list[str]) -> str | None:
    """The earlier stage that ran this very command in the smoke run (at demo size several stages
    do: they differ in model and size only), else None, and this stage is noted as its runner."""
    ledger = out / "smoke_commands.json"
    commands = json.loads(ledger.read_text()) if ledger.exists() else {}
    key = " ".join(arg for arg in argv if not arg.endswith(".json"))
    if key in commands:
        return commands[key]
    ledger.write_text(json.dumps({**commands, key: name}))
    return None


def bench_13b_480p_25(out: Path, smoke: bool) -> dict:
    """Wan 2.1 1.3B at 832x480x25 (SGLang's H100 CI shape), every layer, guided steps."""
    return _bench("bench_13b_480p_25", "wan2.1-t2v-1.3b", (832, 480, 25), 5, smoke=smoke, out=out)


def bench_13b_480p_81(out: Path, smoke: bool) -> dict:
    return _bench("bench_13b_480p_81", "wan2.1-t2v-1.3b", (832, 480, 81), 3, smoke=smoke, out=out)


def bench_14b_720p_81(out: Path, smoke: bool) -> dict:
    """Wan 2.1 14B at 1280x720x81, every layer, bf16 weights: MFU against the dense bf16 peak,
    and diffusers' step beside it, eager and under torch.compile (each two 14B forwards, and
    inductor's compile: most of the stage's time)."""
    return _bench("bench_14b_720p_81", "wan2.1-t2v-14b", (1280, 720, 81), 1, smoke=smoke, out=out)


def bench_14b_720p_81_fp8(out: Path, smoke: bool) -> dict:
    """As bench_14b_720p_81 with the blocks' weights stored in fp8 (diffusers has no such mode)."""
    return _bench("bench_14b_720p_81_fp8", "wan2.1-t2v-14b", (1280, 720, 81), 1, smoke=smoke, out=out,
                  vs=None, sets=("weights_dtype=float8_e4m3fn",))


def bench_14b_720p_81_offload(out: Path, smoke: bool) -> dict:
    """As bench_14b_720p_81 with `offload=layers`: the blocks' weights in host memory, streamed in
    block by block. Issue 30's goals: seconds_per_step at most 1.2x bench_14b_720p_81's (run it in
    the same check, same machine) and peak_memory_bytes under 24 GiB; offload_bytes_per_step over
    seconds_per_step is the host link's rate the stream needed."""
    return _bench("bench_14b_720p_81_offload", "wan2.1-t2v-14b", (1280, 720, 81), 1, smoke=smoke, out=out,
                  vs=None, sets=("offload=layers",))


def bench_14b_720p_81_components(out: Path, smoke: bool) -> dict:
    """As bench_14b_720p_81 with `offload=components`: the expert's weights in host memory, copied
    to the device once per run. seconds_per_step should be bench_14b_720p_81's; its
    weights_to_device_seconds over offload_bytes_per_run is the host link's rate for one copy."""
    return _bench("bench_14b_720p_81_components", "wan2.1-t2v-14b", (1280, 720, 81), 1, smoke=smoke, out=out,
                  vs=None, sets=("offload=components",))


def bench_13b_480p_25_tokamax(out: Path, smoke: bool) -> dict:
    """bench_13b_480p_25 on tokamax's attention kernel instead of cuDNN's (`auto`)."""
    return _bench("bench_13b_480p_25_tokamax", "wan2.1-t2v-1.3b", (832, 480, 25), 5, smoke=smoke, out=out,
                  vs=None, extra=_tokamax_unless(smoke))


def bench_14b_720p_81_tokamax(out: Path, smoke: bool) -> dict:
    return _bench("bench_14b_720p_81_tokamax", "wan2.1-t2v-14b", (1280, 720, 81), 1, smoke=smoke, out=out,
                  vs=None, extra=_tokamax_unless(smoke))


def _tokamax_unless(smoke: bool) -> tuple[str, ...]:
    return () if smoke else ("--attention", "tokamax")  # tokamax has no CPU kernels


def profile_13b_480p_25(out: Path, smoke: bool) -> dict:
    """bench_13b_480p_25 under JAX's profiler (3 steps: the untimed first one too): device time
    by kernel, the 25 largest, and by kind (matmul, attention, other fusions, copies), and per
    step the time outside matmuls and attention (the elementwise work around them), its largest
    kernels each with the arrays it reads and writes in the step's optimized HLO (XLA's dump)."""
    trace_dir = out / "profile_13b_480p_25"
    steps = SMOKE_STEPS if smoke else 2
    with tempfile.TemporaryDirectory() as hlo_dir:  # XLA's dump (HLO, and on a GPU its LLVM IR and PTX) stays here
        dump = f"--xla_dump_to={hlo_dir} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=guided_step"  # the step only
        record = _bench("profile_13b_480p_25", "wan2.1-t2v-1.3b", (832, 480, 25), steps, smoke=smoke, out=out,
                        vs=None, extra=("--profile", str(trace_dir)),
                        env={"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {dump}".strip()})
        kernels = kernel_time(trace_dir)
        around = around_matmuls(kernels.pop("by_name"), steps + 1, Path(hlo_dir))
    return {"seconds_per_step_profiled": record["seconds_per_step"],
            "other_seconds_per_step": around["seconds_per_step"], "around_matmuls": around, **kernels}


def vae_480p_81_vs_diffusers(out: Path, smoke: bool) -> dict:
    """The Wan 2.1 VAE decode of 832x480x81 timed beside diffusers' (untiled and tiled), same latents."""
    return _bench("vae_480p_81_vs_diffusers", "wan2.1-t2v-1.3b", (832, 480, 81), 1, smoke=smoke, out=out,
                  vs="diffusers", vae=True, layers=1)


def _vae(form: str) -> Callable[[Path, bool], dict]:
    def stage(out: Path, smoke: bool) -> dict:
        """The Wan 2.1 VAE decoding 832x480x81 (behind a one-layer 1.3B transformer step)."""
        return _bench(f"vae_480p_81_{form}", "wan2.1-t2v-1.3b", (832, 480, 81), 1, smoke=smoke, out=out,
                      vs=None, vae=True, sets=(f"vae_convolution={form}",), layers=1)

    return stage


STAGES = {
    stage.name: stage
    for stage in (
        Stage("environment", 60, 5, environment),
        Stage("demo_vs_cpu", 150, 30, demo_vs_cpu),
        Stage("attention_32760", 120, 30, attention_32760),
        Stage("diffusers_parity", 90, 20, diffusers_parity),
        Stage("bench_13b_480p_25", 150, 60, bench_13b_480p_25),
        Stage("bench_14b_720p_81", 420, 250, bench_14b_720p_81),
        Stage("bench_13b_480p_81", 150, 60, bench_13b_480p_81),
        Stage("fp8_matmul_13b_480p_25", 200, 100, fp8_matmul_13b_480p_25),
        Stage("attention_sage_32760", 120, 30, attention_sage_32760),
        Stage("sage_13b_480p_25", 300, 150, sage_13b_480p_25),
        # the whole video, each a fresh `wanjax generate` (e2e_stage.py): the goals' 1.3B runs
        Stage("e2e_13b_480p_81", 240, 150, E2E["e2e_13b_480p_81"]),
        Stage("e2e_13b_480p_81_magcache", 150, 90, E2E["e2e_13b_480p_81_magcache"]),
        Stage("e2e_13b_480p_81_teacache", 150, 90, E2E["e2e_13b_480p_81_teacache"]),
        Stage("e2e_13b_480p_81_dbcache", 150, 90, E2E["e2e_13b_480p_81_dbcache"]),
        Stage("vae_480p_81_3d", 120, 40, _vae("3d")),
        Stage("vae_480p_81_frames", 120, 40, _vae("frames")),
        Stage("bench_14b_720p_81_fp8", 240, 120, bench_14b_720p_81_fp8),
        Stage("attention_75600", 120, 40, attention_75600),
        Stage("bench_14b_720p_81_offload", 300, 150, bench_14b_720p_81_offload),
        # after the goals' stages: what would make the step faster
        Stage("bench_13b_480p_25_tokamax", 120, 40, bench_13b_480p_25_tokamax),
        Stage("profile_13b_480p_25", 120, 40, profile_13b_480p_25),
        Stage("bench_14b_720p_81_tokamax", 200, 100, bench_14b_720p_81_tokamax),
        Stage("bench_14b_720p_81_components", 240, 150, bench_14b_720p_81_components),  # the other offload
        Stage("fp8_matmul_14b_720p_81", 300, 200, fp8_matmul_14b_720p_81),
        Stage("bench_14b_720p_81_gguf", 420, 120, bench_14b_720p_81_gguf),  # bf16, Q8_0, Q4_K kernels
        Stage("vae_real_sizes", 600, 60, vae_stage.vae_real_sizes),
        Stage("vae_480p_81_vs_diffusers", 150, 60, vae_480p_81_vs_diffusers),
        # the long whole videos last; the A14B one fills a device call of its own (see SELECTIONS)
        Stage("e2e_ti2v_5b_704p_121", 420, 240, E2E["e2e_ti2v_5b_704p_121"]),
        Stage("e2e_a14b_720p_81", 570, 360, E2E["e2e_a14b_720p_81"]),
    )
}

# Named selections for `--only` (the whole check does not fit one device call). `goals`: issue 46's
# goals that fit one call of 8 minutes (about 380 s on an H200): the 1.3B video end to end, dense and
# with each step cache, its 25-frame step and attention at T = 32760; then the fp8 matmuls' step, which
# the budget skips where the rest took longer (its first try on an H200 ran past 170 s). `a14b`: the Wan 2.2 A14B video,
# a call of its own (run it with --budget 590). `large`: the TI2V-5B video and the 14B steps. `caches`:
# the 1.3B video under each step cache (MagCache, TeaCache, DBCache with TaylorSeer), time and steps computed.
# `quantized`: the 14B step with GGUF Q8_0 and Q4_K kernels beside bf16 (issue 44). `fp8`: the quantized
# compute options of issue 46 (fp8 matmuls, SageAttention-style attention) at the 1.3B 25-frame step and
# attention at T = 32760, each beside bf16, with their errors.
SELECTIONS = {
    "goals": ("environment", "attention_32760", "bench_13b_480p_25", "e2e_13b_480p_81", "e2e_13b_480p_81_magcache",
              "e2e_13b_480p_81_teacache", "profile_13b_480p_25", "fp8_matmul_13b_480p_25"),
    "a14b": ("environment", "e2e_a14b_720p_81"),
    "caches": ("environment", "e2e_13b_480p_81_magcache", "e2e_13b_480p_81_teacache", "e2e_13b_480p_81_dbcache"),
    "large": ("environment", "e2e_ti2v_5b_704p_121", "bench_14b_720p_81"),
    "quantized": ("environment", "bench_14b_720p_81_gguf"),
    "fp8": ("environment", "attention_sage_32760", "fp8_matmul_13b_480p_25", "sage_13b_480p_25"),
}  # fmt: skip
