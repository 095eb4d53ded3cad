"""The accelerator extras (`wanjax[cuda13]`, `[cuda12]`, `[tpu]`) resolve for CPython 3.12 on Linux
x86_64, so an extra that cannot be installed fails here rather than on a user's GPU host.

pip's resolver runs against the package index (a dry run: metadata only, nothing installed) on
each extra's requirements together with the base requirements on the same packages (jax's
bounds), and must pick the accelerator's JAX plugin at jax's own version.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# glibc 2.17 up to 2.35 (Ubuntu 22.04; libtpu needs 2.31), and the legacy names of the oldest
# ones, which pip matches only as written (NVIDIA's CUDA 12 wheels are tagged manylinux2014)
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 36)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]
PLUGINS = {"cuda13": "jax-cuda13-plugin", "cuda12": "jax-cuda12-plugin", "tpu": "libtpu"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower()


def _requirements(extra: str) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["optional-dependencies"][extra]
    names = {_name(r) for r in wanted}
    return wanted + [r for r in project["dependencies"] if _name(r) in names]


def test_every_accelerator_extra_is_checked() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) - {"test"} == set(PLUGINS)


@pytest.mark.parametrize("extra", sorted(PLUGINS))
def test_extra_resolves_for_python_312(extra: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    command = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
        "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", *platforms,
        "--target", str(tmp_path / "unused"), *_requirements(extra),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"wanjax[{extra}] does not resolve for Python 3.12:\n{done.stderr[-3000:]}"
    picked = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}
    assert PLUGINS[extra] in picked, f"wanjax[{extra}] resolved without {PLUGINS[extra]}: {sorted(picked)}"
    if extra != "tpu":  # the CUDA plugins are released with jax, at its version
        assert picked[PLUGINS[extra]] == picked["jax"]
