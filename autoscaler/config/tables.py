"""Measured tables in ParvaGPU's CSV format -> a measured profile (config/measured.py). Pure.

One CSV per model (the file's stem names it), columns `Mig instance` (compute slices of the MIG
slice: 1, 2, 3, 4, 7), `Batch size`, `Workload Number` (MPS processes of that model in the
slice), `Throughput` (req/s of ONE process) and `Latency` (seconds per batch). A row of zeros was
not measured (out of memory in ParvaGPU's tables) and is skipped. Anything else wrong stops the
import, naming the file and the line: text that is not UTF-8 (a BOM is read), a table past the
size or row caps, a missing column, a value that is not a finite non-negative number or is past
the ceilings `igniter plan` applies to a profile (config/limits.py), a slice size the GPU does not
have, a row measured twice (both lines named), a model with no usable row or no usable name.
"""

from __future__ import annotations

import codecs
import csv
import io
import math
from collections.abc import Iterator, Mapping

from pydantic import TypeAdapter, ValidationError

from autoscaler.config.errors import InputError, from_validation
from autoscaler.config.fields import Name
from autoscaler.config.limits import above_ceiling
from autoscaler.config.measured import MeasuredProfile, MeasuredRow, MeasuredSource
from autoscaler.config.mig import BUNDLED, MigGeometry

COLUMNS = {
    "Mig instance": "slice",
    "Batch size": "batch",
    "Workload Number": "processes",
    "Throughput": "throughput",
    "Latency": "latency",
}
_CEILING_COLUMN = {"batch": "Batch size", "processes": "Workload Number", "throughput_rps": "Throughput"}
# Caps on one import. ParvaGPU's tables hold 225 rows a model (2,475 in all, about 6 KB a table);
# the caps leave twenty times that a table and eight times it in all, and keep the import, and a
# plan that loads the profile, to seconds (docs/planner.md gives the measurements).
MAX_TABLE_BYTES = 2**20
MAX_TABLE_ROWS = 5_000
MAX_PROFILE_ROWS = 20_000
MAX_TABLES = 1_000
_MODEL_NAME: TypeAdapter[str] = TypeAdapter(Name)


def import_tables(tables: Mapping[str, str | bytes], *, gpu: str, source: str) -> MeasuredProfile:
    """`tables` maps each CSV's path to its bytes (or text); the profile's models are the files' stems."""
    geometry = BUNDLED.get(gpu)
    if geometry is None:
        raise InputError("--gpu", "", f"unknown GPU {gpu!r} (MIG geometry bundled for: {', '.join(BUNDLED)})")
    if not tables:
        raise InputError(source, "", "no *.csv tables in this folder")
    if len(tables) > MAX_TABLES:
        raise InputError(source, "", f"{len(tables):,} tables, more than the {MAX_TABLES:,} one import reads")
    models: dict[str, tuple[MeasuredRow, ...]] = {}
    total = 0
    for path, data in sorted(tables.items()):
        rows = _rows(path, decode_table(path, data), geometry)
        total += len(rows)
        if total > MAX_PROFILE_ROWS:
            raise InputError(path, "", f"the tables hold more than {MAX_PROFILE_ROWS:,} usable rows in all (the cap)")
        models[model_name(path)] = rows
    files = tuple(sorted(p.rsplit("/", 1)[-1] for p in tables))
    try:
        return MeasuredProfile(
            kind="measured",
            gpu=gpu,
            geometry=gpu,
            source=MeasuredSource(format="parvagpu-csv", path=source, files=files),
            models=models,
        )
    except ValidationError as exc:  # every row was checked; kept so that nothing ends in a traceback
        raise from_validation(source, exc) from None


def model_name(path: str) -> str:
    """The file's stem, if a policy can name it as a model (`.csv` or `a b.csv` cannot)."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".csv")
    try:
        return _MODEL_NAME.validate_python(stem)
    except ValidationError:
        shown = repr(stem) if stem else "nothing"
        raise InputError(
            path, "", f"the file's name gives the model name {shown}: name it MODEL.csv (letters, digits, . _ -)"
        ) from None


def decode_table(path: str, data: str | bytes) -> str:
    """Bytes -> text: at most MAX_TABLE_BYTES, UTF-8, a leading BOM (Excel writes one) dropped."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if len(data) > MAX_TABLE_BYTES:
        raise InputError(path, "", f"{len(data):,} bytes, more than the {MAX_TABLE_BYTES:,} a table may have")
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = skip + exc.start
        line = data.count(b"\n", 0, at) + 1
        raise InputError(f"{path}:{line}", "", f"not UTF-8 text (byte 0x{data[at]:02x} at offset {at})") from None


def _records(path: str, text: str) -> Iterator[tuple[int, list[str]]]:
    """(line, cells) of each non-blank CSV record, the header first; csv's own errors (a field
    past its 131,072-character limit, a NUL byte, an unclosed quote) name the line."""
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"{path}:{reader.line_num}", "", f"not a CSV table: {exc}") from None
        if cells:
            yield reader.line_num, cells


def _rows(path: str, text: str, geometry: MigGeometry) -> tuple[MeasuredRow, ...]:
    records = _records(path, text)
    header = next(records, None)
    if header is None:
        raise InputError(f"{path}:1", "", f"empty: no header row (columns: {', '.join(COLUMNS)})")
    index = _columns(f"{path}:{header[0]}", header[1])
    rows: list[MeasuredRow] = []
    seen: dict[tuple[float, ...], tuple[int, tuple[float, ...]]] = {}
    line = header[0]
    for count, (line, cells) in enumerate(records, start=1):
        where = f"{path}:{line}"
        if count > MAX_TABLE_ROWS:
            raise InputError(where, "", f"more than {MAX_TABLE_ROWS:,} rows (the cap on one table)")
        values = {key: _number(where, column, _cell(cells, index[column])) for column, key in COLUMNS.items()}
        _check_duplicate(where, line, values, seen)
        row = _row(where, values, geometry)
        if row is not None:
            rows.append(row)
    if not rows:
        raise InputError(f"{path}:{line}", "", "no usable row: every row is zero (not measured)")
    return tuple(rows)


def _columns(where: str, header: list[str]) -> dict[str, int]:
    """Each wanted column's index in the header (extra columns are ignored)."""
    names = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError(where, "", f"missing column {missing[0]!r} (columns: {', '.join(COLUMNS)})")
    return {c: names.index(c) for c in COLUMNS}


def _cell(cells: list[str], i: int) -> str | None:
    return cells[i] if i < len(cells) else None


def _check_duplicate(
    where: str, line: int, values: dict[str, float], seen: dict[tuple[float, ...], tuple[int, tuple[float, ...]]]
) -> None:
    """One row per (slice, batch, processes): a second one, equal or not, is refused with both lines
    (a conflicting one silently changed the plan; which of the two is right is the user's call)."""
    key = (values["slice"], values["batch"], values["processes"])
    measured = (values["throughput"], values["latency"])
    first = seen.setdefault(key, (line, measured))
    if first[0] == line:
        return
    what = "the same row as" if first[1] == measured else "a different Throughput or Latency than"
    raise InputError(
        where,
        "",
        f"duplicate row: Mig instance {key[0]:g}, Batch size {key[1]:g}, Workload Number {key[2]:g} "
        f"again, with {what} line {first[0]}",
    )


def _row(where: str, values: Mapping[str, float], geometry: MigGeometry) -> MeasuredRow | None:
    if values["throughput"] == 0 and values["latency"] == 0:
        return None  # not measured
    for key in ("slice", "batch", "processes"):
        if values[key] != int(values[key]) or values[key] < 1:
            raise InputError(where, "", f"{_column(key)} must be a whole number >= 1, not {values[key]:g}")
    for key in ("throughput", "latency"):
        if values[key] <= 0:
            raise InputError(where, "", f"{_column(key)} must be positive (a measured row), not {values[key]:g}")
    profile = geometry.by_compute(int(values["slice"])) if values["slice"] <= 8 else None
    if profile is None:
        have = sorted({p.compute_slices for p in geometry.profiles})
        raise InputError(where, "", f"this GPU has no {values['slice']:g}g slice (sizes: {have})")
    fields = {
        "batch": values["batch"],
        "processes": values["processes"],
        "throughput_rps": values["throughput"],
        "latency_ms": values["latency"] * 1000.0,
    }
    _check_ceilings(where, fields, values["latency"])
    return MeasuredRow(
        slice=profile.name,
        batch=int(fields["batch"]),
        processes=int(fields["processes"]),
        throughput_rps=fields["throughput_rps"],
        latency_ms=fields["latency_ms"],
    )


def _check_ceilings(where: str, fields: Mapping[str, float], latency_s: float) -> None:
    """The ceilings `igniter plan` applies when it loads the profile (config/limits.py), here, so
    that an import never writes a profile the planner then refuses."""
    for field, value, ceiling in above_ceiling(dict(fields)):
        if field == "latency_ms":
            shown = f"Latency {latency_s:g} s is above the ceiling {ceiling / 1000.0:g} s"
        else:
            shown = f"{_CEILING_COLUMN[field]} {value:g} is above the ceiling {ceiling:g}"
        raise InputError(where, "", f"{shown} (docs/operations.md, Limits)")


def _number(where: str, column: str, text: str | None) -> float:
    try:
        value = float((text or "").strip())
    except ValueError:
        raise InputError(where, "", f"{column} must be a number, not {_short(text)}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(where, "", f"{column} must be a finite number >= 0, not {_short(text)}")
    return value


def _short(text: str | None) -> str:
    """A cell as the error shows it: a 100,000-character one is cut (the message stays one short line)."""
    shown = repr(text)
    return shown if len(shown) <= 40 else f"{shown[:37]}..."


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
