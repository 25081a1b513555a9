"""iGniter autoscaler: interference-aware provisioning of GPU inference fleets."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

DIST = "igniter-autoscaler"  # pyproject.toml's version is the only one: `igniter --version` reads it from here

try:
    __version__ = _dist_version(DIST)
except PackageNotFoundError:  # a bare checkout on PYTHONPATH, not installed
    __version__ = "0+unknown (not installed: pip install -e .)"
