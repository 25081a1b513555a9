"""The fitted GPU profiles kept as files (model/fit_cache.py's FitStore), in the user's cache
directory: what lets an `igniter` process that finds them plan without importing scipy.

One small JSON list per fit (a float's repr reads back as the same float), named by its key, under
`fits/` in the cache directory. A fit is written under a temporary name and renamed into place, so
processes fitting the same profile at once never read half a file. Nothing here raises: a file that
cannot be read is no answer (the fit is made again and written over it), a directory that cannot be
written keeps nothing. Deleting the directory is always safe.

The cache directory is the first set of: $IGNITER_CACHE_DIR; $CACHE_DIRECTORY, which systemd sets
for a unit with CacheDirectory= (deploy/systemd/igniter.service; the first of its colon-separated
list); $XDG_CACHE_HOME/igniter; ~/.cache/igniter. IGNITER_NO_CACHE set to anything but "" or "0"
keeps nothing (every process fits again). A relative path is taken from the working directory.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from autoscaler.model import fit_cache

FITS = "fits"  # the subdirectory of the cache directory that holds the fits


class FitFiles:
    """A FitStore on a directory: `root`/fits/KEY.json."""

    def __init__(self, root: Path) -> None:
        self.dir = root / FITS

    def get(self, key: str) -> object:
        try:
            return json.loads((self.dir / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, values: tuple[float, ...]) -> None:
        """Write whole or not at all (a temporary file renamed into place)."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".fit-", suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump([float(v) for v in values], f)
                os.replace(tmp, self.dir / f"{key}.json")
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return  # a cache that cannot be written keeps nothing; the fit stands


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


def keep_fits(env: Mapping[str, str]) -> None:
    """This process keeps its fits where `env` says (an entry point's first step)."""
    root = cache_dir(env)
    fit_cache.use(None if root is None else FitFiles(root))
