"""The prepared device check: stages, each in its own process under its own time budget, with
every result written to OUT/check.json as soon as it is known (so a run cut off by its lease
still leaves what finished). Run through scripts/device-check, which installs the kit first.

    python scripts/device/check.py --out OUT [--smoke] [--budget SECONDS] [--only a,b|SELECTION]

A stage's process prints one JSON object as its last line; the runner records it with the
stage's status (passed, failed, timeout, skipped) and seconds. --smoke runs every stage at
tiny sizes on the CPU (the dry run that keeps the check from rotting between GPU runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from stages import SELECTIONS, STAGES, Stage

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder for check.json and the stages' files")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for all stages together")
    parser.add_argument("--only", help="comma-separated stage names or selections (default: all, in order); "
                        f"selections: {', '.join(f'{k} ({len(v)} stages)' for k, v in SELECTIONS.items())}")
    parser.add_argument("--report", type=Path, help="where check.json goes (default: OUT/check.json)")
    parser.add_argument("--list", action="store_true", help="print the stage names, in order, and exit")
    parser.add_argument("--stage", help=argparse.SUPPRESS)  # internal: run one stage in this process
    args = parser.parse_args()
    if args.list:
        print("\n".join(STAGES))
        return 0
    if args.out is None:
        parser.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.stage:
        result = STAGES[args.stage].run(args.out, args.smoke)
        print(json.dumps(result))
        return 0
    names = list(STAGES) if not args.only else _known(args.only.split(","))
    report = args.report or args.out / "check.json"
    return run_all([STAGES[n] for n in names], args.out, args.smoke, args.budget, report)


def _known(names: list[str]) -> list[str]:
    """The stages `names` name, a selection standing for its stages (each stage once, first place kept)."""
    unknown = [n for n in names if n not in STAGES and n not in SELECTIONS]
    if unknown:
        raise SystemExit(f"device check: unknown stage(s) {unknown}; known: {', '.join(STAGES)}; "
                         f"selections: {', '.join(SELECTIONS)}")
    return list(dict.fromkeys(stage for n in names for stage in SELECTIONS.get(n, (n,))))


_FOR_TIME = " (the check's budget)"


def run_all(stages: list[Stage], out: Path, smoke: bool, budget: float, report_path: Path) -> int:
    """Runs `stages` in order; a stage whose budget no longer fits is skipped, not started, and the
    report's `next_call` names the `--only` that runs the stages so skipped in another call."""
    report: dict = {"smoke": smoke, "budget_seconds": budget, "stages": {}}
    deadline = time.monotonic() + budget
    for stage in stages:
        left = deadline - time.monotonic()
        if left < stage.least_seconds:
            entry = {"status": "skipped", "reason": f"{left:.0f} s left, needs {stage.least_seconds:.0f}{_FOR_TIME}"}
        else:
            entry = _run_stage(stage, out, smoke, min(stage.budget_seconds, left))
        report["stages"][stage.name] = entry
        _write_json(report_path, report)
        print(f"[device check] {stage.name}: {entry['status']} {_brief(entry)}", flush=True)
    failed = [n for n, e in report["stages"].items() if e["status"] in ("failed", "timeout")]
    print(f"[device check] done: {len(stages) - len(failed)} of {len(stages)} stages passed or skipped; "
          f"failed: {', '.join(failed) or 'none'}; {report_path}", flush=True)
    if left_out := [s.name for s in stages if report["stages"][s.name].get("reason", "").endswith(_FOR_TIME)]:
        report["next_call"] = f"--only {','.join(left_out)}"
        _write_json(report_path, report)
        print(f"[device check] not run for time: {', '.join(left_out)}; run them in a call of their own: "
              f"scripts/device-check --kit KIT --out OUT {report['next_call']}", flush=True)
    return 1 if failed else 0


def _run_stage(stage: Stage, out: Path, smoke: bool, seconds: float) -> dict:
    command = [sys.executable, str(HERE / "check.py"), "--out", str(out), "--stage", stage.name]
    command += ["--smoke"] if smoke else []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = out / f"{stage.name}.log"
    start = time.monotonic()
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=sink, text=True, env=env,
                                   start_new_session=True)
        try:
            stdout, _ = process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.communicate()
            return {"status": "timeout", "seconds": round(time.monotonic() - start, 1), "budget": round(seconds),
                    "log_tail": _tail(log)}
    elapsed = round(time.monotonic() - start, 1)
    lines = stdout.strip().splitlines()
    if process.returncode != 0 or not lines:
        return {"status": "failed", "seconds": elapsed, "exit": process.returncode, "log_tail": _tail(log)}
    result = json.loads(lines[-1])
    status = result.pop("status", "passed")
    return {"status": status, "seconds": elapsed, **result}


def _tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _brief(entry: dict) -> str:
    keep = {k: v for k, v in entry.items() if k not in ("log_tail", "packages", "status")}
    text = json.dumps(keep)
    return text if len(text) < 1500 else text[:1500] + " ..."


def _write_json(path: Path, value: dict) -> None:
    temporary = path.with_name(f".{path.name}.partial")
    temporary.write_text(json.dumps(value, indent=2) + "\n")
    temporary.replace(path)


if __name__ == "__main__":
    sys.exit(main())
