"""The layer rule, checked at run time: importing the domain (and building a container) loads no backend."""

import subprocess
import sys

PROBE = """
import importlib, pkgutil, sys
import wanjax.domain
for module in pkgutil.walk_packages(wanjax.domain.__path__, "wanjax.domain."):
    importlib.import_module(module.name)
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"jax", "flax", "torch", "transformers", "safetensors"})
print(",".join(heavy))
"""

CONTAINER_PROBE = """
import sys
from wanjax.application.container import build_container
from wanjax.domain.config import GenerationConfig
build_container(GenerationConfig())
print("torch" in sys.modules)
"""


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def test_domain_imports_no_backend():
    assert _run(PROBE) == ""


def test_building_a_container_imports_no_torch():
    assert _run(CONTAINER_PROBE) == "False"
