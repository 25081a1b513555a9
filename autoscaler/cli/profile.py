"""`igniter profile import DIR --gpu GPU --out FILE`: measured tables -> a measured profile.

DIR holds one CSV per model in ParvaGPU's format (autoscaler/config/tables.py gives the columns):
the public A100 80GB tables, or tables measured the same way on your own GPUs. The profile records
where it came from. With `--out profiles/a100-80gb.yaml` a policy with `profiles_dir: profiles`
and an instance type of `gpu: a100-80gb` plans on it (docs/planner.md).

Exit codes: 0 ok; 1 internal error; 2 bad input (`FILE:LINE: what is wrong`), and then nothing is
written.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.errors import InputError
from autoscaler.config.mig import BUNDLED
from autoscaler.config.tables import import_tables


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add `profile import` to the igniter CLI."""
    p = subparsers.add_parser("profile", help="import measured GPU profiles")
    sub = p.add_subparsers(dest="profile_command", required=True, metavar="ACTION")
    i = sub.add_parser(
        "import",
        help="convert a folder of per-model CSVs (ParvaGPU's format) into a measured profile",
        description="Convert measured per-model MIG tables (ParvaGPU's CSV format) into a profile of kind "
        "`measured` that policies can name as a GPU type.",
    )
    i.add_argument("folder", type=Path, metavar="DIR", help="folder of per-model CSV files")
    i.add_argument("--gpu", required=True, help=f"the GPU measured (MIG geometry: {', '.join(BUNDLED)})")
    i.add_argument("--out", type=Path, required=True, help="profile YAML to write (e.g. profiles/a100-80gb.yaml)")
    i.set_defaults(func=run_import)
    return p


def run_import(args: argparse.Namespace) -> int:
    """Read every CSV, convert (all or nothing), then write the profile atomically."""
    folder: Path = args.folder
    if not folder.is_dir():
        raise InputError(folder, "", "not a folder of CSV tables")
    tables = {str(path): path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.csv"))}
    profile = import_tables(tables, gpu=args.gpu, source=str(folder))
    text = yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False, default_flow_style=None, width=120)
    _write(args.out, text)
    rows = sum(len(r) for r in profile.models.values())
    print(f"{args.out}: {len(profile.models)} models, {rows} measured rows on {args.gpu} (from {folder})")
    return 0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a profile is as readable as any file written
    os.replace(tmp, path)
