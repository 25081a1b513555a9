"""Where `igniter` keeps what it computed and may reuse: the fitted GPU profiles (model/fit_cache.py).

The first that is set of: $IGNITER_CACHE_DIR; $CACHE_DIRECTORY, which systemd sets for a unit with
CacheDirectory= (deploy/systemd/igniter.service; the first of its colon-separated list);
$XDG_CACHE_HOME/igniter; ~/.cache/igniter. IGNITER_NO_CACHE set to anything but "" or "0" keeps
nothing (every process fits again). A relative path is taken from the working directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from autoscaler.model import fit_cache


def cache_dir(env: Mapping[str, str]) -> Path | None:
    """The cache directory `env` names (module docstring), or None where caching is off or no
    directory can be named (no HOME)."""
    if env.get("IGNITER_NO_CACHE", "") not in ("", "0"):
        return None
    if env.get("IGNITER_CACHE_DIR"):
        return Path(env["IGNITER_CACHE_DIR"]).absolute()
    if env.get("CACHE_DIRECTORY"):
        return Path(env["CACHE_DIRECTORY"].split(":")[0]).absolute()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).absolute() / "igniter"
    home = env.get("HOME")
    return Path(home).absolute() / ".cache" / "igniter" if home else None


def use_from(env: Mapping[str, str] = os.environ) -> None:
    """Keep this process's fits where `env` says (fit_cache.use)."""
    fit_cache.use(cache_dir(env))
