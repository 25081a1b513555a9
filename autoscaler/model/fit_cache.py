"""Fitted curves kept between processes, so that a process fitting a profile that a process on this
host fitted before reads the answer instead of computing it.

Fitting a profile is cheap (some 10 ms), but its one nonlinear fit needs scipy.optimize, whose
import costs every process that fits 0.5 to 0.6 s of CPU: most of an `igniter plan`, and of an
`igniter run`'s start (benchmarks/cli_start.py). With the fits kept, a process plans without
importing scipy at all.

A fit is a pure function of its inputs, so the answer kept under a digest of all of them is the
answer a fresh fit gives, to the last bit: the digest holds the points, the start and the bounds as
bytes, the source of the module that fits (a change to the curve or to the call is a new digest),
and the versions of the libraries that compute it (another scipy may land a last bit apart). An
answer read back that is not the expected count of finite floats is fitted again and replaced.

Where they are kept is a `FitStore`, given by the entry points (`use`): loop/state/fit_files.py
keeps them as files in the user's cache directory. Until one is given nothing is kept: a library
caller or a test that fits gets a fresh fit.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

__all__ = ["FitStore", "in_use", "remembered", "source", "use", "versions"]


class FitStore(Protocol):
    """Answers by key (a hex digest). `get` returns what `put` was given, or anything at all (a
    damaged file, another program's): `remembered` checks it. Neither raises for a store that
    cannot be read or written; that only costs the saving."""

    def get(self, key: str) -> object: ...

    def put(self, key: str, values: tuple[float, ...]) -> None: ...


_store: FitStore | None = None


def use(store: FitStore | None) -> None:
    """Keep fits in `store` from now on in this process (None: keep none)."""
    global _store
    _store = store


def in_use() -> FitStore | None:
    """The store `use` gave, or None."""
    return _store


def remembered(parts: Sequence[bytes], fit: Callable[[], tuple[float, ...]], *, size: int) -> tuple[float, ...]:
    """`fit()`, a tuple of `size` floats, kept under the digest of `parts` (which must hold all
    that the answer depends on: see `source` and `versions`) and read back from there next time."""
    store = _store
    if store is None:
        return fit()
    key = _digest(parts)
    kept = _valid(store.get(key), size)
    if kept is not None:
        return kept
    out = fit()
    store.put(key, out)
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


def _valid(values: object, size: int) -> tuple[float, ...] | None:
    """`values` as `size` finite floats, or None."""
    if not isinstance(values, list | tuple) or len(values) != size:
        return None
    if not all(type(v) is float and math.isfinite(v) for v in values):
        return None
    return tuple(values)
