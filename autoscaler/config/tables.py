"""Measured tables in ParvaGPU's CSV format -> a measured profile (config/measured.py). Pure.

One CSV per model (the file's stem names it), columns `Mig instance` (compute slices of the MIG
slice: 1, 2, 3, 4, 7), `Batch size`, `Workload Number` (MPS processes of that model in the
slice), `Throughput` (req/s of ONE process) and `Latency` (seconds per batch). A row of zeros was
not measured (out of memory in ParvaGPU's tables) and is skipped. Anything else wrong stops the
import, naming the file and the line: a missing column, a value that is not a finite
non-negative number, a slice size the GPU does not have, a model with no usable row.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping

from autoscaler.config.errors import InputError
from autoscaler.config.measured import MeasuredProfile, MeasuredRow, MeasuredSource
from autoscaler.config.mig import BUNDLED, MigGeometry

COLUMNS = {
    "Mig instance": "slice",
    "Batch size": "batch",
    "Workload Number": "processes",
    "Throughput": "throughput",
    "Latency": "latency",
}


def import_tables(tables: Mapping[str, str], *, gpu: str, source: str) -> MeasuredProfile:
    """`tables` maps each CSV's path to its text; the profile's models are the files' stems."""
    geometry = BUNDLED.get(gpu)
    if geometry is None:
        raise InputError("--gpu", "", f"unknown GPU {gpu!r} (MIG geometry bundled for: {', '.join(BUNDLED)})")
    if not tables:
        raise InputError(source, "", "no *.csv tables in this folder")
    models = {_stem(path): _rows(path, text, geometry) for path, text in sorted(tables.items())}
    files = tuple(sorted(p.rsplit("/", 1)[-1] for p in tables))
    return MeasuredProfile(
        kind="measured",
        gpu=gpu,
        geometry=gpu,
        source=MeasuredSource(format="parvagpu-csv", path=source, files=files),
        models=models,
    )


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".csv")


def _rows(path: str, text: str, geometry: MigGeometry) -> tuple[MeasuredRow, ...]:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or ()]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise InputError(f"{path}:1", "", f"missing column {missing[0]!r} (columns: {', '.join(COLUMNS)})")
    reader.fieldnames = header
    rows = []
    for raw in reader:
        line = reader.line_num
        row = _row(f"{path}:{line}", raw, geometry)
        if row is not None:
            rows.append(row)
    if not rows:
        raise InputError(f"{path}:{reader.line_num}", "", "no usable row: every row is zero (not measured)")
    return tuple(rows)


def _row(where: str, raw: Mapping[str, str | None], geometry: MigGeometry) -> MeasuredRow | None:
    values = {key: _number(where, column, raw.get(column)) for column, key in COLUMNS.items()}
    if values["throughput"] == 0 and values["latency"] == 0:
        return None  # not measured
    for key in ("slice", "batch", "processes"):
        if values[key] != int(values[key]) or values[key] < 1:
            raise InputError(where, "", f"{_column(key)} must be a whole number >= 1, not {values[key]:g}")
    for key in ("throughput", "latency"):
        if values[key] <= 0:
            raise InputError(where, "", f"{_column(key)} must be positive (a measured row), not {values[key]:g}")
    profile = geometry.by_compute(int(values["slice"]))
    if profile is None:
        have = sorted({p.compute_slices for p in geometry.profiles})
        raise InputError(where, "", f"this GPU has no {int(values['slice'])}g slice (sizes: {have})")
    return MeasuredRow(
        slice=profile.name,
        batch=int(values["batch"]),
        processes=int(values["processes"]),
        throughput_rps=values["throughput"],
        latency_ms=values["latency"] * 1000.0,
    )


def _number(where: str, column: str, text: str | None) -> float:
    try:
        value = float((text or "").strip())
    except ValueError:
        raise InputError(where, "", f"{column} must be a number, not {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(where, "", f"{column} must be a finite number >= 0, not {text!r}")
    return value


def _column(key: str) -> str:
    return next(c for c, k in COLUMNS.items() if k == key)


# ParvaGPU's scenario files (one row per scenario, one column per model in this order; N/A: not served)
SCENARIO_MODELS = (
    "bert",
    "densenet121",
    "densenet169",
    "densenet201",
    "inceptionv3",
    "mobilenetv2",
    "resnet101",
    "resnet152",
    "resnet50",
    "vgg16",
    "vgg19",
)


def parvagpu_scenarios(rates_csv: str, slos_csv: str) -> list[dict[str, tuple[float, float]]]:
    """ParvaGPU's scenarios from its request-rate and latency-SLO files: per scenario, model ->
    (rate in req/s, SLO in ms), the models it does not serve left out."""
    out = []
    for rrow, srow in zip(rates_csv.split(), slos_csv.split()):
        cells = zip(SCENARIO_MODELS, rrow.split(","), srow.split(","))
        out.append({m: (float(r), float(s)) for m, r, s in cells if r != "N/A" and s != "N/A"})
    return out
