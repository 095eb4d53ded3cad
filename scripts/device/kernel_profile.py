"""Where a profiled step's device time goes: the Perfetto trace's kernels summed by name and kind
(attention, matmul, copy, other), and for the kernels outside matmuls and attention (XLA's fusions
around them: activations, gates, modulation, norms, residuals, RoPE) what each reads and writes,
from the step's optimized HLO that XLA dumped in the same process (`--xla_dump_to`).

A GPU kernel of XLA's is named after its fusion instruction with `.` turned into `_`
(`loop_convert_fusion.2` runs as `loop_convert_fusion_2`), so the two meet by that name.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter
from pathlib import Path

KERNEL_KINDS = (
    ("attention", re.compile(r"cudnn|fmha|flash|attention|sdpa", re.IGNORECASE)),
    ("matmul", re.compile(r"gemm|cutlass|xmma|nvjet|cublas|wgmma|dot", re.IGNORECASE)),
    ("copy", re.compile(r"memcpy|memset|copy", re.IGNORECASE)),
    ("other", re.compile(r".")),
)
AROUND_MATMULS = ("other", "copy")  # what is neither a matmul nor attention
DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2,
               "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8}  # fmt: skip
ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([\w\-]+)\((.*)$")


def kind_of(kernel: str) -> str:
    return next(kind for kind, pattern in KERNEL_KINDS if pattern.search(kernel))


def kernel_time(trace_dir: Path) -> dict:
    """Sums the Perfetto trace's complete events on device processes (all of them on a host-only
    run) by name; on a GPU only its stream lines, which hold the kernels (the "XLA Ops" and
    "XLA Modules" lines beside them repeat the same time). `by_name`: microseconds per kernel."""
    (trace,) = trace_dir.glob("plugins/profile/*/perfetto_trace.json.gz")
    events = json.loads(gzip.open(trace).read())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    devices = {pid for pid, name in names.items() if "/device:" in name} or set(names)
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") in devices}
    streams = {key for key, name in threads.items() if name.startswith("Stream")}
    by_name: Counter[str] = Counter()
    for event in events:
        on_device = event.get("pid") in devices and (not streams or (event["pid"], event.get("tid")) in streams)
        if event.get("ph") == "X" and on_device:
            by_name[event["name"]] += event.get("dur", 0.0)  # microseconds
    total = sum(by_name.values()) or 1.0
    by_kind: Counter[str] = Counter()
    for name, micros in by_name.items():
        by_kind[kind_of(name)] += micros
    return {
        "device_processes": sorted(names[p] for p in devices),
        "lines": sorted(threads[key] for key in streams) if streams else "all",
        "device_seconds": total / 1e6,
        "share_by_kind": {kind: round(micros / total, 4) for kind, micros in by_kind.most_common()},
        "top_kernels": [{"name": name[:160], "seconds": micros / 1e6, "share": round(micros / total, 4)}
                        for name, micros in by_name.most_common(25)],
        "by_name": dict(by_name),
    }


def around_matmuls(by_name: dict[str, float], steps: int, hlo_dir: Path | None, top: int = 12) -> dict:
    """The device time per step outside matmuls and attention (`seconds_per_step`, and split into
    XLA's fusions and copies), and its `top` kernels, each with what the step's optimized HLO says
    it reads and writes (`hlo`: output and operand arrays, their bytes; absent where no dumped
    instruction has the kernel's name)."""
    kinds = {name: kind_of(name) for name in by_name}
    split = {kind: sum(micros for name, micros in by_name.items() if kinds[name] == kind) / 1e6 / steps
             for kind in AROUND_MATMULS}
    outside = Counter({name: micros for name, micros in by_name.items() if kinds[name] in AROUND_MATMULS})
    signatures = fusion_signatures(step_module(hlo_dir)) if hlo_dir is not None else {}
    kernels = []
    for name, micros in outside.most_common(top):
        entry = {"name": name[:160], "seconds_per_step": micros / 1e6 / steps}
        if (signature := signatures.get(name)) is not None:
            entry["hlo"] = signature
        kernels.append(entry)
    return {"seconds_per_step": sum(split.values()), "fusions_seconds_per_step": split["other"],
            "copies_seconds_per_step": split["copy"], "kernels": kernels}


def step_module(hlo_dir: Path) -> str:
    """The largest optimized module XLA dumped into `hlo_dir` (the denoising step, where the dump is
    not limited to it: the process's other modules are a fraction of its size); "" if none."""
    dumped = sorted(hlo_dir.glob("*after_optimizations.txt"), key=lambda path: path.stat().st_size)
    return dumped[-1].read_text() if dumped else ""


def fusion_signatures(hlo_text: str) -> dict[str, dict]:
    """Each fusion instruction of an HLO module's text, by its kernel name: its output arrays and
    its operands' (resolved through the shapes of the instructions and parameters they name), and
    the bytes of both, which is what the kernel moves at the least."""
    signatures: dict[str, dict] = {}
    shapes: dict[str, list[str]] = {}
    for line in hlo_text.splitlines():
        if line.rstrip().endswith("{") or line.strip() == "}":
            shapes = {} if line.strip() == "}" else _computation_parameters(line)
            continue
        match = INSTRUCTION.match(line)
        if match is None:
            continue
        name, output, opcode, rest = match.groups()
        shapes[name] = _arrays(output)
        if opcode != "fusion":
            continue
        operands = []
        for token in _top_level_operands(rest):
            arrays = _arrays(token) or shapes.get(token.split()[-1].lstrip("%"), [])
            operands += arrays
        outputs = shapes[name]
        signatures[name.replace(".", "_")] = {
            "output": outputs, "operands": operands,
            "bytes_written": sum(map(_bytes, outputs)), "bytes_read": sum(map(_bytes, operands)),
        }  # fmt: skip
    return signatures


def _computation_parameters(header: str) -> dict[str, list[str]]:
    """A computation's header `%name (p0: f32[2,3], p1: bf16[4]) -> ... {`: its parameters' arrays."""
    inside = header[header.find("(") + 1 : header.rfind(") ->")] if ") ->" in header else ""
    return {name.strip().lstrip("%"): _arrays(shape) for name, shape in
            (part.split(":", 1) for part in _top_level_operands(inside + ")") if ":" in part)}  # fmt: skip


def _top_level_operands(rest: str) -> list[str]:
    """The comma-separated operands up to the `)` closing an instruction's operand list."""
    depth, current, parts = 0, "", []
    for char in rest:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [part for part in (*parts, current.strip()) if part]


def _arrays(text: str) -> list[str]:
    return [f"{dtype}[{dims}]" for dtype, dims in ARRAY.findall(text) if dtype in DTYPE_BYTES]


def _bytes(array: str) -> int:
    dtype, dims = ARRAY.match(array).groups()
    return DTYPE_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
