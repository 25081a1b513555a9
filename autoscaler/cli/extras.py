"""Which extra of the distribution brings a missing module, and the one line that says so.

The base install carries only what `igniter` and `igniter-agent` share; the central service's
libraries come with `[service]`, matplotlib with `[plot]`, torch with `[agent]` (pyproject.toml).
A command that meets a missing one stops with `pip install 'igniter-autoscaler[EXTRA]'`, exit 2,
instead of a traceback.
"""

from __future__ import annotations

import importlib.util

DIST = "igniter-autoscaler"
EXTRAS = {
    "service": ("scipy", "apscheduler", "boto3", "botocore", "paramiko", "httpx", "psutil"),
    "plot": ("matplotlib",),
    "agent": ("torch", "pynvml"),
}


def extra_for(module: str | None) -> str | None:
    """The extra that installs `module` (a dotted name), or None when no extra of ours does."""
    root = (module or "").split(".")[0]
    return next((extra for extra, roots in EXTRAS.items() if root in roots), None)


def install_hint(extra: str) -> str:
    return f"pip install '{DIST}[{extra}]'"


def missing(module: str) -> bool:
    """True when `module` cannot be imported here (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True
