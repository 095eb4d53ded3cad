"""Tests use the product through its public names: none imports a name (or a module) whose name
starts with an underscore from `wanjax`. What a test needs is made public or lives in tests/."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def private_imports(source: str) -> list[str]:
    """`module: name` for every underscore name imported from wanjax in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("wanjax"):
            module_parts = node.module.split(".")
            found += [f"{node.module}: {a.name}" for a in node.names if a.name.startswith("_")]
            found += [node.module] if any(part.startswith("_") for part in module_parts) else []
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("wanjax") and "._" in a.name]
    return found


def test_the_check_sees_each_form() -> None:
    source = "from wanjax.a import _b, c\nfrom wanjax._d import e\nimport wanjax.f._g\nfrom other import _h\n"
    assert private_imports(source) == ["wanjax.a: _b", "wanjax._d", "wanjax.f._g"]


def test_no_test_imports_a_private_name() -> None:
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in sorted(TESTS.rglob("*.py"))
        if (found := private_imports(path.read_text()))
    }
    assert offenders == {}
