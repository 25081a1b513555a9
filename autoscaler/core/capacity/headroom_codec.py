"""One workload's headroom estimator as it is saved: its numbers packed in one string. Pure.

Why: the controller saves its whole state every tick (loop/state/store.py save_state), and the
headroom estimator is nearly all of it: about 210 numbers per workload once its windows have
filled (50 histogram weights, a plan per tick of the last boot_s, a peak per tick of the last
burst_window_s, an attainment bucket per 5 minutes of the last hour). As JSON arrays that was
2.2 MB at 1,000 workloads, and writing it (float repr, 52 ms) and reading it back (14 ms) cost
0.07 s a tick, growing over the first hour as the windows filled (issue 50). Packed as float64
(base64: about 11 characters a number, about what the text took) neither formats nor parses a float.

The string: the positions (in the array) that hold None, comma-separated, then ':', then the
base64 of the little-endian float64 array [number of plans, of weights, of buckets, of peaks,
observed_at, samples_s, allowance, the plans' times, base forecasts, headrooms, planned rates,
the weights, the buckets' starts, covered seconds and seconds, the peaks' times and rates]. A None
is stored as NaN and named in the list before ':', so a NaN stays a NaN and a None a None.

Exactly what the JSON arrays gave back: every number comes back as the float it was (or the
float of the int it was: JSON's from_json made floats of ints too), every sequence as a tuple.
"""

from __future__ import annotations

import array
import binascii
import functools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec

HEAD = 7  # the counts (4), observed_at, samples_s, allowance
NONES = (4, 6)  # the head's positions that may hold None


Packed = tuple[str, bool]  # the string, and whether unpacking it gives back the very values packed
P = ParamSpec("P")


def _none_on_bad_values(fn: Callable[P, Packed | None]) -> Callable[P, Packed | None]:
    """`fn`, answering None where it meets a value that is not a number (TypeError) or a
    sequence not of its size (ValueError: zip strict)."""

    @functools.wraps(fn)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> Packed | None:
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError):
            return None

    return guarded


@_none_on_bad_values
def pack(
    forecasts: Sequence[tuple[Any, ...]],
    weights: Sequence[float],
    observed_at: float | None,
    samples_s: float,
    attain: Sequence[tuple[Any, ...]],
    peaks: Sequence[tuple[Any, ...]],
    allowance: float | None,
) -> Packed | None:
    """The packed string, and whether every value is a float (None only where named above) and
    every sequence a tuple of tuples, so that unpacking it gives values equal to these and of
    their types (the caller may keep them instead of unpacking). None where a sequence's entries
    are not all of their size (plans of 4, buckets of 3, peaks of 2) or a value is not a number:
    the caller writes that workload as JSON arrays instead."""
    cols = list(zip(*forecasts, strict=True)) if forecasts else [(), (), (), ()]
    buckets = list(zip(*attain, strict=True)) if attain else [(), (), ()]
    times = list(zip(*peaks, strict=True)) if peaks else [(), ()]
    if len(cols) != 4 or len(buckets) != 3 or len(times) != 2:
        return None
    nones: list[int] = []
    if observed_at is None or allowance is None:
        nones = [k for k, v in zip(NONES, (observed_at, allowance), strict=True) if v is None]
        observed_at = math.nan if observed_at is None else observed_at
        allowance = math.nan if allowance is None else allowance
    planned = cols[3]
    if None in planned:
        at = HEAD + 3 * len(forecasts)
        nones += [at + k for k, v in enumerate(planned) if v is None]
        planned = tuple([math.nan if v is None else v for v in planned])
    counts = (len(forecasts), len(weights), len(attain), len(peaks))
    values = [observed_at, samples_s, allowance, *cols[0], *cols[1], *cols[2], *planned, *weights, *buckets[0]]
    values += [*buckets[1], *buckets[2], *times[0], *times[1]]
    packed = array.array("d", counts)
    packed.extend(array.array("d", values))
    if sys.byteorder == "big":
        packed.byteswap()
    text = ",".join(map(str, nones)) + ":" + binascii.b2a_base64(packed.tobytes(), newline=False).decode("ascii")
    return text, _FLOATS.issuperset(map(type, values)) and _tuples(forecasts, weights, attain, peaks)


_FLOATS = frozenset([float])
_TUPLES = frozenset([tuple])


def _tuples(
    forecasts: Sequence[tuple[Any, ...]],
    weights: Sequence[float],
    attain: Sequence[tuple[Any, ...]],
    peaks: Sequence[tuple[Any, ...]],
) -> bool:
    """Every sequence a tuple, as unpack() makes them."""
    return (
        _TUPLES.issuperset(map(type, (forecasts, weights, attain, peaks)))
        and _TUPLES.issuperset(map(type, forecasts))
        and _TUPLES.issuperset(map(type, attain))
        and _TUPLES.issuperset(map(type, peaks))
    )


def unpack(text: str) -> dict[str, Any]:
    """The fields pack() was given, as the keyword arguments of a WorkloadErrors; ValueError
    (or TypeError) where `text` is not a packed string."""
    head, sep, body = text.partition(":")
    if not sep:
        raise ValueError("not a packed headroom state")
    values = array.array("d")
    values.frombytes(binascii.a2b_base64(body, strict_mode=True))
    if sys.byteorder == "big":
        values.byteswap()
    flat: list[Any] = values.tolist()
    for k in map(int, head.split(",")) if head else ():
        if not 0 <= k < len(flat):
            raise ValueError("packed headroom state names a None past its end")
        flat[k] = None
    nf, nw, na, npk = (int(v) for v in flat[:4])
    if min(nf, nw, na, npk) < 0 or len(flat) != HEAD + 4 * nf + nw + 3 * na + 2 * npk:
        raise ValueError("packed headroom state of the wrong length")
    at = HEAD
    plans = tuple(
        zip(
            flat[at : at + nf],
            flat[at + nf : at + 2 * nf],
            flat[at + 2 * nf : at + 3 * nf],
            flat[at + 3 * nf : at + 4 * nf],
        )
    )
    at += 4 * nf
    weights = tuple(flat[at : at + nw])
    at += nw
    b, p = at + 3 * na, at + 3 * na + npk
    return {
        "forecasts": plans,
        "weights": weights,
        "observed_at": flat[4],
        "samples_s": flat[5],
        "attain": tuple(zip(flat[at : at + na], flat[at + na : at + 2 * na], flat[at + 2 * na : b])),
        "peaks": tuple(zip(flat[b:p], flat[p:])),
        "allowance": flat[6],
    }
