"""Fitted curves kept on disk, so that a process fitting a profile that a process on this host fitted
before reads the answer instead of computing it.

Fitting a profile is cheap (some 10 ms), but its one nonlinear fit needs scipy.optimize, whose
import costs every process that fits 0.5 to 0.6 s of CPU: most of an `igniter plan`, and of an
`igniter run`'s start (benchmarks/cli_start.py). With the fits kept, a process plans without
importing scipy at all.

A fit is a pure function of its inputs, so the answer kept under a digest of all of them is the
answer a fresh fit gives, to the last bit: the digest holds the points, the start and the bounds as
bytes, the source of the module that fits (a change to the curve or to the call is a new digest), and
the versions of the libraries that compute it (another scipy may land a last bit apart). Each
answer is one small JSON file (a float's repr reads back as the same float), written under a
temporary name and renamed into place, so processes fitting the same profile at once never read
half a file; a file that cannot be read, or holds anything but the expected count of finite numbers,
is fitted again and replaced. A directory that cannot be written costs nothing but the saving.

Where: `use(root)`, which the entry points call with what `cache_dir` reads of their environment
(the `igniter` CLI, the demos). Until then nothing is kept: a library caller or a test that fits gets
a fresh fit.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

FITS = "fits"  # the subdirectory of the cache directory that holds the fits
_root: Path | None = None

__all__ = ["FITS", "cache_dir", "in_use", "remembered", "source", "use", "versions"]


def cache_dir(env: Mapping[str, str]) -> Path | None:
    """The cache directory an environment names: the first set of $IGNITER_CACHE_DIR; $CACHE_DIRECTORY,
    which systemd sets for a unit with CacheDirectory= (deploy/systemd/igniter.service; the first of
    its colon-separated list); $XDG_CACHE_HOME/igniter; ~/.cache/igniter. None where
    IGNITER_NO_CACHE is set to anything but "" or "0" (every process fits again), or where no
    directory can be named (no HOME). A relative path is taken from the working directory."""
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


def use(root: Path | None) -> None:
    """Keep fits under `root`/fits from now on in this process (None: keep none)."""
    global _root
    _root = root


def in_use() -> Path | None:
    """The cache directory `use` set, or None."""
    return _root


def remembered(parts: Sequence[bytes], fit: Callable[[], tuple[float, ...]], *, size: int) -> tuple[float, ...]:
    """`fit()`, a tuple of `size` floats, kept under the digest of `parts` (which must hold all
    that the answer depends on: see `source` and `versions`) and read back from there next time."""
    root = _root
    if root is None:
        return fit()
    path = root / FITS / f"{_digest(parts)}.json"
    kept = _read(path, size)
    if kept is not None:
        return kept
    out = fit()
    _write(path, out)
    return out


@functools.cache
def source(path: str) -> bytes:
    """The digest of a module's file (its `__file__`): a part of every key its fits are kept under."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).digest()
    except OSError:
        return b"unreadable:" + path.encode()


@functools.cache
def versions(*dists: str) -> bytes:
    """The installed versions of `dists` (their metadata, so none is imported): a key part."""
    out = []
    for dist in dists:
        try:
            out.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{dist}==?")
    return ";".join(out).encode()


def _digest(parts: Sequence[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))  # so that no two lists of parts read alike
        h.update(part)
    return h.hexdigest()


def _read(path: Path, size: int) -> tuple[float, ...] | None:
    try:
        values = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(values, list) or len(values) != size:
        return None
    if not all(type(v) is float and math.isfinite(v) for v in values):
        return None
    return tuple(values)


def _write(path: Path, values: tuple[float, ...]) -> None:
    """Write `values` to `path` whole or not at all (a temporary file renamed into place)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".fit-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump([float(v) for v in values], f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return  # a cache that cannot be written keeps nothing; the fit stands
