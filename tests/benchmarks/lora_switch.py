"""Per-request LoRAs on the CPU: the time to switch between two rank-32 LoRAs, and the step time
with a LoRA switched in against the same LoRA merged at load (docs/performance.md).

Usage: .venv/bin/python tests/benchmarks/lora_switch.py [--layers 4] [--dtype float32] [--switches 6]
       [--no-steps]

The Wan 2.1 1.3B architecture cut to `--layers` of its 30, random weights; two LoRA files of
rank 32 over every block linear (attention q/k/v/o of both attentions, both FFN matmuls), in
diffusers names. A switch is what a request with other LoRAs than the last one's adds to its
run: entering `JaxLoraSwitch.applied` (the merge on the device) until the merged arrays are
ready. "Cached" switches find both files' factors on the device; the first use of a file also
reads it. The step time is `wanjax bench`'s (shortest interval between completed steps of a
guided fp32 run at 256x256, 9 frames), for the switched-in parameters and for a model loaded
with the LoRA merged into its tensors (`with_loras`, today's `--lora`), alternating.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import attrs
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors.numpy import save_file

from wanjax.adapters.jax.attention.blockwise import BlockwiseAttention
from wanjax.adapters.jax.bench import random_transformer, time_denoising
from wanjax.adapters.jax.denoising.denoiser import JaxDenoiser
from wanjax.adapters.jax.denoising.program import DenoiserOptions
from wanjax.adapters.jax.lora.switch import JaxLoraSwitch
from wanjax.adapters.jax.transformer.runtime import TransformerRuntime
from wanjax.adapters.jax.transformer.weights import export_transformer_weights, load_transformer
from wanjax.adapters.lora import with_loras
from wanjax.domain import architectures
from wanjax.domain.config import GenerationConfig
from wanjax.domain.lora import LoraSpec
from wanjax.domain.plan import plan_sampling

RANK = 32
LINEARS = ("attn1.to_q", "attn1.to_k", "attn1.to_v", "attn1.to_out.0", "attn2.to_q", "attn2.to_k", "attn2.to_v",
           "attn2.to_out.0", "ffn.net.0.proj", "ffn.net.2")  # fmt: skip


def write_rank32_lora(path: Path, weights: dict[str, np.ndarray], layers: int, seed: int) -> Path:
    rng, tensors = np.random.default_rng(seed), {}
    for i in range(layers):
        for linear in LINEARS:
            out, inp = weights[f"blocks.{i}.{linear}.weight"].shape
            tensors[f"transformer.blocks.{i}.{linear}.lora_A.weight"] = (0.01 * rng.standard_normal((RANK, inp))).astype(np.float32)
            tensors[f"transformer.blocks.{i}.{linear}.lora_B.weight"] = (0.01 * rng.standard_normal((out, RANK))).astype(np.float32)
    save_file(tensors, path)
    return path


def timed_switch(switch: JaxLoraSwitch, denoiser: JaxDenoiser, spec: LoraSpec) -> float:
    start = time.perf_counter()
    with switch.applied(((spec,),)):
        jax.block_until_ready(denoiser.program.params)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--switches", type=int, default=6)
    parser.add_argument("--no-steps", action="store_true", help="time the switches only")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    spec = attrs.evolve(architectures.WAN21_T2V_1_3B, num_layers=args.layers)
    dtype = jnp.dtype(args.dtype)
    runtime = TransformerRuntime(dtype=dtype, param_dtype=dtype, attention=BlockwiseAttention())
    base = random_transformer(spec, runtime)
    tensors = export_transformer_weights(base)
    with tempfile.TemporaryDirectory() as folder:
        a, b = (LoraSpec(str(write_rank32_lora(Path(folder) / f"{n}.safetensors", tensors, args.layers, i)), 0.8)
                for i, n in enumerate("ab"))  # fmt: skip
        denoiser = JaxDenoiser([base])
        switch = JaxLoraSwitch(denoiser, cache_bytes=2**31)
        first = [timed_switch(switch, denoiser, s) for s in (a, b)]  # reads each file, compiles the merge once
        cached = [timed_switch(switch, denoiser, s) for _ in range(args.switches) for s in (a, b)]
        print(f"switch, first use of a file (read + merge; the first also compiles): {first[0]:.2f} s, {first[1]:.2f} s")
        print(f"switch between cached rank-{RANK} LoRAs: best {min(cached):.2f} s, median {statistics.median(cached):.2f} s "
              f"over {len(cached)} ({args.layers} layers, {args.dtype})", flush=True)  # fmt: skip
        if args.no_steps:
            return
        with switch.applied(((a,),)):
            switched = nnx.merge(denoiser.program.model.graphdef, denoiser.program.params[0])
        merged_at_load = load_transformer(spec, runtime, with_loras(tensors, [a]))
    config = GenerationConfig.from_mapping(dict(height=256, width=256, num_frames=9, num_inference_steps=3))
    request = config.request("a fox", negative_prompt="blurry", guidance_scale=5.0)
    plan = plan_sampling(request, num_experts=1, model_boundary_ratio=None)
    shape = (1, 3, 32, 32, spec.in_channels)
    context = np.random.default_rng(0).standard_normal((1, 512, spec.text_dim)).astype(np.float32)
    times: dict[str, list[float]] = {"switched in": [], "merged at load": []}
    for _ in range(2):
        for name, model in (("merged at load", merged_at_load), ("switched in", switched)):
            timing = time_denoising([model], DenoiserOptions(), plan, shape, context, context)
            times[name].append(timing.seconds_per_step)
            print(f"  {name}: {timing.seconds_per_step:.2f} s/step", flush=True)
    best = {name: min(values) for name, values in times.items()}
    print(f"step: switched in {best['switched in']:.2f} s, merged at load {best['merged at load']:.2f} s, "
          f"ratio {best['switched in'] / best['merged at load']:.3f}")  # fmt: skip
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
