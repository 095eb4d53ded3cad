"""Maps the layer folders at the repository root onto the `wanjax` import namespace."""

import warnings

from setuptools import find_packages, setup
from setuptools.warnings import InformationOnly

# An editable install of this layout (layer folders mapped into one namespace) always takes
# setuptools' import finder, which then prints a notice that concerns src-less layouts in general;
# pip shows it as a warning on every `scripts/setup`. It is information only: silenced here.
warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)

LAYERS = ("domain", "adapters", "application", "entrypoints", "configs")

packages: list[str] = []
package_dir: dict[str, str] = {}
for layer in LAYERS:
    packages.append(f"wanjax.{layer}")
    package_dir[f"wanjax.{layer}"] = layer
    packages.extend(f"wanjax.{layer}.{sub}" for sub in find_packages(layer))
# The browser page's folder holds no Python: declared as a package of data files, it is shipped
# (setuptools warns of an importable folder that is neither declared nor excluded).
packages.append("wanjax.entrypoints.page")

setup(
    packages=packages,
    package_dir=package_dir,
    package_data={"wanjax.configs": ["*.yaml"], "wanjax.entrypoints.page": ["*.html", "*.css", "*.js"]},
)
