"""`igniter predict`: latency and throughput of workloads co-located on one GPU."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, TextIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.table import Table

from autoscaler.config.errors import InputError, from_validation
from autoscaler.model.perfmodel import PerfModel, Placement, load_perf_model


class _PlacementIn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    model: str
    batch: Annotated[int, Field(ge=1, le=4096)]
    mps_percent: Annotated[float, Field(gt=0, le=100)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    placements: Annotated[list[_PlacementIn], Field(min_length=1)]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict co-located latency and throughput on one GPU")
    p.add_argument("--profile", required=True, help="GPU profile YAML (e.g. policies/profiles/v100.yaml)")
    p.add_argument(
        "--place",
        action="append",
        default=[],
        metavar="MODEL:BATCH:MPS",
        help="a placement; repeat for co-located workloads",
    )
    p.add_argument("--batch-file", metavar="F", help='JSON lines {"placements": [...]} in ("-" for stdin)')
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def parse_place(spec: str, index: int) -> _PlacementIn:
    """MODEL:BATCH:MPS -> a validated placement; errors name `--place[i]`."""
    parts = spec.split(":")
    field = f"--place[{index}]"
    if len(parts) != 3:
        raise InputError("command line", field, f"expected MODEL:BATCH:MPS, got {spec!r}")
    try:
        return _PlacementIn(model=parts[0], batch=parts[1], mps_percent=parts[2])
    except ValidationError as exc:
        raise from_validation("command line", exc, prefix=[field]) from None


def _check_models(model: PerfModel, placements: Iterable[_PlacementIn], source: str, field: str) -> None:
    for i, p in enumerate(placements):
        if p.model not in model.models:
            known = ", ".join(sorted(model.models))
            raise InputError(
                source,
                f"{field}[{i}].model" if field else f"--place[{i}]",
                f"model {p.model!r} is not in the profile (known: {known})",
            )


def predict_json(model: PerfModel, placements: Iterable[_PlacementIn]) -> dict:
    preds = model.predict([Placement(p.model, p.batch, p.mps_percent) for p in placements])
    return {
        "predictions": [
            {"latency_ms": round(x.latency_ms, 6), "throughput_rps": round(x.throughput_rps, 6)} for x in preds
        ]
    }


def _read_requests(path: str) -> Iterator[tuple[int, _Request]]:
    """Yield (line number, request) for every non-blank line; bad lines are InputErrors."""
    stream: TextIO = sys.stdin if path == "-" else _open(path)
    source = "<stdin>" if path == "-" else path
    with stream:
        try:
            for lineno, line in enumerate(stream, start=1):
                if line.strip():
                    yield lineno, _request(source, lineno, line)
        except UnicodeDecodeError as exc:
            raise InputError(source, "", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None


def _request(source: str, lineno: int, line: str) -> _Request:
    """One JSON line: strict JSON (no duplicate keys, no NaN or Infinity), then the schema."""
    try:
        data = json.loads(line, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        message = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InputError(source, f"line {lineno}", f"invalid JSON: {message}") from None
    try:
        return _Request.model_validate(data)
    except ValidationError as exc:
        err = from_validation(source, exc)
        raise InputError(source, f"line {lineno}: {err.field}", err.message) from None


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """json's object hook: a key twice in one object is an error (json would keep the last)."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (numbers must be finite)")


def _open(path: str) -> TextIO:
    try:
        return Path(path).open(encoding="utf-8")
    except OSError as exc:
        raise InputError(path, "", f"cannot read: {exc.strerror}") from None


def run(args: argparse.Namespace) -> int:
    if bool(args.place) == bool(args.batch_file):
        raise InputError("command line", "--place/--batch-file", "give --place (one or more) or --batch-file, not both")
    model = load_perf_model(args.profile)
    if args.batch_file:
        return _run_batch(model, args.batch_file)
    placements = [parse_place(s, i) for i, s in enumerate(args.place)]
    _check_models(model, placements, "command line", "")
    out = predict_json(model, placements)
    if args.json:
        print(json.dumps(out))
    else:
        _print_table(model, placements, out)
    return 0


def _run_batch(model: PerfModel, path: str) -> int:
    """Validate every line first so bad input changes nothing, then answer in order."""
    source = "<stdin>" if path == "-" else path
    requests = list(_read_requests(path))
    for lineno, req in requests:
        _check_models(model, req.placements, source, f"line {lineno}: placements")
    sys.stdout.writelines(json.dumps(predict_json(model, req.placements)) + "\n" for _, req in requests)
    return 0


def _print_table(model: PerfModel, placements: list[_PlacementIn], out: dict) -> None:
    table = Table(title=f"{model.profile.gpu}: {len(placements)} co-located workload(s)")
    for col in ("model", "batch", "MPS %", "latency ms", "throughput req/s"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for p, pred in zip(placements, out["predictions"]):
        table.add_row(
            p.model, str(p.batch), f"{p.mps_percent:g}", f"{pred['latency_ms']:.2f}", f"{pred['throughput_rps']:.1f}"
        )
    Console().print(table)
