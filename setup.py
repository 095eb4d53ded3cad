"""Maps the layer folders at the repository root onto the `wanjax` import namespace."""

from setuptools import find_packages, setup

LAYERS = ("domain", "adapters", "application", "entrypoints", "configs")

packages: list[str] = []
package_dir: dict[str, str] = {}
for layer in LAYERS:
    packages.append(f"wanjax.{layer}")
    package_dir[f"wanjax.{layer}"] = layer
    packages.extend(f"wanjax.{layer}.{sub}" for sub in find_packages(layer))

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={"wanjax.configs": ["*.yaml"], "wanjax.entrypoints": ["page/*"]},
)
