"""Request-rate traces: read, reshape and write the wide CSV that `igniter simulate` replays.

The wide format (docs/simulate.md): a `time_s` column, then one column per workload name, in requests per
second; row k's rate holds from its time until the next row's. The long format (one row per time
and name, as the ServeGen release ships it) is turned into the wide one by `long_to_wide`.

Every problem with a file is an InputError naming the file, the line or column, and what is wrong,
so the CLI exits 2 with one line instead of a traceback. No clock, no network: files in, arrays out.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from autoscaler.config.errors import InputError
from autoscaler.config.limits import MAX_RATE_RPS, MAX_TRACE_TIME_S

TIME_COL = "time_s"
MAX_ROWS = 10_000_000  # a reshaped trace (--agg linear onto a fine grid) may not grow past this
Agg = Literal["mean", "max", "linear"]


@dataclass(frozen=True)
class Trace:
    """Rates per workload on a shared, strictly increasing time axis (seconds)."""

    source: str
    times: np.ndarray  # shape (n,)
    rates: Mapping[str, np.ndarray]  # workload -> shape (n,), req/s, finite and >= 0
    step_s: float  # the duration of the last row (the median spacing)

    @property
    def names(self) -> list[str]:
        return list(self.rates)

    @property
    def duration_s(self) -> float:
        """From the first row's time to the end of the last row's step."""
        return float(self.times[-1] - self.times[0] + self.step_s)

    def peak(self) -> dict[str, float]:
        return {w: float(v.max()) for w, v in self.rates.items()}

    def mean(self) -> dict[str, float]:
        return {w: float(v.mean()) for w, v in self.rates.items()}


def _open_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and data rows of a CSV file; a missing, unreadable or empty file is an InputError."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:  # a BOM (Excel's UTF-8 CSV) is no column name
            rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    except FileNotFoundError:
        raise InputError(path, "", "file not found") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(path, "", f"cannot read as CSV: {exc}") from None
    if not rows:
        raise InputError(path, "", "file is empty")
    header = [c.strip() for c in rows[0]]
    if len(header) != len(set(header)):
        dup = next(c for c in header if header.count(c) > 1)
        raise InputError(path, f"column {dup!r}", "appears more than once in the header")
    return header, rows[1:]


def _number(path: Path, line: int, col: str, text: str, *, rate: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(path, f"line {line}, column {col!r}", f"{text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise InputError(path, f"line {line}, column {col!r}", f"{text.strip()!r} is not a finite number")
    if rate and value < 0:
        raise InputError(path, f"line {line}, column {col!r}", f"a rate cannot be negative ({value:g})")
    ceiling = MAX_RATE_RPS if rate else MAX_TRACE_TIME_S
    if abs(value) > ceiling:
        what = "a rate" if rate else "a time"
        raise InputError(
            path, f"line {line}, column {col!r}", f"{value:g} is above the ceiling for {what} ({ceiling:g})"
        )
    return value


def read_wide(path: str | Path, time_col: str = TIME_COL) -> Trace:
    """Parse a wide trace; the time column must strictly increase and every rate be >= 0."""
    path = Path(path)
    header, rows = _open_rows(path)
    if time_col not in header:
        hint = "" if time_col != TIME_COL else " (pass --time-col for another name)"
        raise InputError(path, time_col, f"missing {time_col!r} column; the header has {', '.join(header)}{hint}")
    names = [c for c in header if c != time_col]
    if not names:
        raise InputError(path, "header", f"no rate columns besides {time_col!r}")
    if not rows:
        raise InputError(path, "", "no data rows after the header")
    ti = header.index(time_col)
    data = np.zeros((len(rows), len(header)))
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise InputError(path, f"line {i + 2}", f"{len(row)} fields, the header has {len(header)}")
        for j, text in enumerate(row):
            data[i, j] = _number(path, i + 2, header[j], text, rate=j != ti)
    return _trace(path, data[:, ti], {n: data[:, header.index(n)] for n in names})


def _trace(path: Path, times: np.ndarray, rates: dict[str, np.ndarray]) -> Trace:
    gaps = np.diff(times)
    if (gaps <= 0).any():
        k = int(np.argmax(gaps <= 0))
        raise InputError(path, f"line {k + 3}", f"time {times[k + 1]:g} does not increase (previous row {times[k]:g})")
    step = float(np.median(gaps)) if len(gaps) else 1.0
    return Trace(str(path), times.astype(float), rates, step)


def rename(trace: Trace, mapping: Mapping[str, str]) -> Trace:
    """Columns renamed OLD -> NEW (e.g. trace columns onto a policy's workload names)."""
    for old in mapping:
        if old not in trace.rates:
            raise InputError(
                trace.source, f"column {old!r}", f"no such column to rename (columns: {', '.join(trace.names)})"
            )
    rates = {mapping.get(k, k): v for k, v in trace.rates.items()}
    if len(rates) != len(trace.rates):
        raise InputError(trace.source, "--rename", "two columns would get the same name")
    return Trace(trace.source, trace.times, rates, trace.step_s)


def scale(trace: Trace, factor: float) -> Trace:
    """Every rate multiplied by `factor` (replay a small service's shape at fleet size)."""
    if not math.isfinite(factor) or factor <= 0:
        raise InputError(trace.source, "--scale", f"must be a positive finite number, got {factor:g}")
    peak = max(float(v.max()) for v in trace.rates.values()) * factor
    if peak > MAX_RATE_RPS:
        raise InputError(
            trace.source, "--scale", f"makes the busiest rate {peak:g} req/s, above the ceiling {MAX_RATE_RPS:g}"
        )
    return Trace(trace.source, trace.times, {k: v * factor for k, v in trace.rates.items()}, trace.step_s)


def window(trace: Trace, start_s: float | None = None, end_s: float | None = None) -> Trace:
    """Rows whose time lies in [start_s, end_s) (times relative to the first row)."""
    rel = trace.times - trace.times[0]
    keep = np.ones(len(rel), dtype=bool)
    if start_s is not None:
        keep &= rel >= start_s
    if end_s is not None:
        keep &= rel < end_s
    if not keep.any():
        raise InputError(trace.source, "--start/--end", "the window selects no rows")
    return Trace(trace.source, trace.times[keep], {k: v[keep] for k, v in trace.rates.items()}, trace.step_s)


def resample(trace: Trace, step_s: float, agg: Agg = "mean") -> Trace:
    """Rows aggregated into windows of `step_s` (mean: the average rate; max: the busiest row), or
    with "linear" interpolated onto a finer grid of `step_s` (a 10-minute trace as 1-minute rows:
    the rate ramps between the measured points instead of jumping at each one).

    Rows are weighted equally, which is exact for an evenly spaced trace (the real ones are)."""
    if not math.isfinite(step_s) or step_s <= 0:
        raise InputError(trace.source, "--step-s", "must be a positive finite number")
    if agg == "linear":
        return _interpolate(trace, step_s)
    if step_s < trace.step_s:
        raise InputError(
            trace.source,
            "--step-s",
            f"{step_s:g} s is finer than the trace's own {trace.step_s:g} s "
            "(--agg linear interpolates onto a finer grid)",
        )
    bins = np.floor((trace.times - trace.times[0]) / step_s + 1e-9).astype(int)
    edges = np.flatnonzero(np.diff(bins)) + 1
    starts = np.concatenate([[0], edges])
    reduce = np.maximum.reduceat if agg == "max" else np.add.reduceat
    counts = np.diff(np.concatenate([starts, [len(bins)]]))
    out = {}
    for k, v in trace.rates.items():
        red = reduce(v, starts)
        out[k] = red if agg == "max" else red / counts
    return Trace(trace.source, trace.times[0] + bins[starts] * step_s, out, float(step_s))


def _interpolate(trace: Trace, step_s: float) -> Trace:
    """The trace sampled every `step_s` from its first row to its last, linearly between rows."""
    if step_s > trace.step_s:
        raise InputError(
            trace.source,
            "--step-s",
            f"--agg linear refines a trace; {step_s:g} s is coarser than its own {trace.step_s:g} s (use mean or max)",
        )
    n = int(np.floor((trace.times[-1] - trace.times[0]) / step_s + 1e-9)) + 1
    if n > MAX_ROWS:
        raise InputError(trace.source, "--step-s", f"{step_s:g} s would make {n:,} rows (at most {MAX_ROWS:,})")
    times = trace.times[0] + step_s * np.arange(n)
    return Trace(
        trace.source, times, {k: np.interp(times, trace.times, v) for k, v in trace.rates.items()}, float(step_s)
    )


def check_workloads(trace: Trace, workloads: Sequence[str], policy_source: str) -> None:
    """Every trace column must be a workload of the policy and every workload have a column."""
    known = set(workloads)
    for name in trace.names:
        if name not in known:
            raise InputError(
                trace.source,
                f"column {name!r}",
                f"not a workload of {policy_source} (workloads: {', '.join(workloads)}; "
                "use --rename OLD=NEW to map columns onto workload names)",
            )
    for name in workloads:
        if name not in trace.rates:
            raise InputError(
                trace.source,
                f"column {name!r}",
                f"missing: {policy_source} has workload {name!r} but the trace has no such column "
                f"(columns: {', '.join(trace.names)})",
            )


def write_wide(trace: Trace, path: str | Path) -> None:
    """Write the wide CSV (time_s first); rates keep up to 6 decimals."""
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow([TIME_COL, *trace.names])
        for i, t in enumerate(trace.times):
            out.writerow([_fmt(t), *(_fmt(trace.rates[n][i]) for n in trace.names)])


def _fmt(x: float) -> str:
    return f"{x:.6f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


@dataclass(frozen=True)
class LongColumns:
    time: str = TIME_COL
    name: str = "name"
    rate: str = "rate_rps"


@dataclass(frozen=True)
class Converted:
    trace: Trace
    filled: int  # (time, name) cells absent from the input, written as 0 req/s
    summed: int  # duplicate (time, name) rows whose rates were added


def long_to_wide(path: str | Path, cols: LongColumns = LongColumns(), names: Iterable[str] | None = None) -> Converted:
    """A long trace (one row per time and name) as a wide one; names keep their first-seen order.

    A name with no row at some time had no requests then (0 req/s); duplicate rows are summed (the
    same window reported per client or per region). Both are counted for the caller to report."""
    path = Path(path)
    header, rows = _open_rows(path)
    for col in (cols.time, cols.name, cols.rate):
        if col not in header:
            raise InputError(path, col, f"missing column {col!r}; the header has {', '.join(header)}")
    cells, order = _long_cells(path, header, rows, cols)
    wanted = list(names) if names is not None else order
    for n in wanted:
        if n not in order:
            raise InputError(path, f"name {n!r}", f"not in column {cols.name!r} (names: {', '.join(order)})")
    times = sorted({t for t, _ in cells})
    data = {n: np.array([cells.get((t, n), (0.0, 0))[0] for t in times]) for n in wanted}
    filled = sum(1 for t in times for n in wanted if (t, n) not in cells)
    summed = sum(c - 1 for (_, n), (_, c) in cells.items() if n in wanted and c > 1)
    return Converted(_trace(path, np.array(times, dtype=float), data), filled, summed)


def _long_cells(
    path: Path, header: list[str], rows: list[list[str]], cols: LongColumns
) -> tuple[dict[tuple[float, str], tuple[float, int]], list[str]]:
    ti, ni, ri = header.index(cols.time), header.index(cols.name), header.index(cols.rate)
    cells: dict[tuple[float, str], tuple[float, int]] = {}
    order: list[str] = []
    for i, row in enumerate(rows):
        if len(row) != len(header):
            raise InputError(path, f"line {i + 2}", f"{len(row)} fields, the header has {len(header)}")
        name = row[ni].strip()
        if not name:
            raise InputError(path, f"line {i + 2}, column {cols.name!r}", "empty name")
        t = _number(path, i + 2, cols.time, row[ti], rate=False)
        r = _number(path, i + 2, cols.rate, row[ri], rate=True)
        if name not in order:
            order.append(name)
        old, count = cells.get((t, name), (0.0, 0))
        cells[(t, name)] = (old + r, count + 1)
    if not cells:
        raise InputError(path, "", "no data rows after the header")
    return cells, order
