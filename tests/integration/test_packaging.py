"""The package builds without warnings (pip shows a local project's build warnings to the user on
the README's first command, `scripts/setup`), and its wheel carries the browser page's files.

The build runs as pip runs it: setuptools' PEP 517 hooks in a fresh process, their warnings
recorded, on a copy of the project (a build writes its egg-info beside the sources)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT_FILES = ("setup.py", "pyproject.toml", "README.md", "domain", "adapters", "application", "entrypoints", "configs")
BUILD = """
import json, sys, warnings
import setuptools.build_meta as backend
with warnings.catch_warnings(record=True) as caught:  # as pip's hook runner records them
    warnings.simplefilter("default")
    name = getattr(backend, sys.argv[1])(sys.argv[2])
print(json.dumps({"wheel": name, "warnings": [str(w.message).splitlines()[0] for w in caught]}))
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("project")
    for name in PROJECT_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(source, copy / name)
    return copy


@pytest.mark.parametrize("hook", ["build_editable", "build_wheel"])
def test_the_build_prints_no_warning_and_ships_the_page(project, tmp_path, hook):
    built = subprocess.run([sys.executable, "-c", BUILD, hook, str(tmp_path)], cwd=project, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    result = json.loads(built.stdout.strip().splitlines()[-1])
    assert result["warnings"] == []
    if hook == "build_wheel":
        names = zipfile.ZipFile(tmp_path / result["wheel"]).namelist()
        assert {f"wanjax/entrypoints/page/{name}" for name in ("index.html", "page.css", "page.js")} <= set(names)
