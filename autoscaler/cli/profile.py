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
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.errors import InputError
from autoscaler.config.mig import BUNDLED
from autoscaler.config.tables import MAX_TABLE_BYTES, MAX_TABLES, import_tables

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's: a 20,000-row table in a fraction of a second


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
    try:
        paths = sorted(folder.glob("*.csv"))
    except OSError as exc:
        raise InputError(folder, "", f"cannot list: {exc.strerror or exc}") from None
    if len(paths) > MAX_TABLES:
        raise InputError(folder, "", f"{len(paths):,} tables, more than the {MAX_TABLES:,} one import reads")
    tables = {str(path): read_table(path) for path in paths}
    profile = import_tables(tables, gpu=args.gpu, source=str(folder))
    text = yaml.dump(
        profile.model_dump(mode="json"), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=120
    )
    _write(args.out, text)
    rows = sum(len(r) for r in profile.models.values())
    print(f"{args.out}: {len(profile.models)} models, {rows} measured rows on {args.gpu} (from {folder})")
    return 0


def read_table(path: Path) -> bytes:
    """A table's bytes, from a regular file only and at most MAX_TABLE_BYTES of them.

    stat first, so a directory, a FIFO (whose open would wait for a writer) or a device such as
    /dev/zero (endless) is refused by its kind; the open is non-blocking and the opened file is
    checked again, so a path swapped for a FIFO in between cannot hang the import either.
    """
    try:
        kind = os.stat(path).st_mode
        if not stat.S_ISREG(kind):
            raise InputError(path, "", f"not a regular file (a {_kind(kind)}): a table must be a plain CSV file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            opened = os.fstat(fh.fileno())
            if not stat.S_ISREG(opened.st_mode):
                raise InputError(path, "", f"not a regular file (a {_kind(opened.st_mode)})")
            if opened.st_size > MAX_TABLE_BYTES:
                raise InputError(
                    path, "", f"{opened.st_size:,} bytes, more than the {MAX_TABLE_BYTES:,} a table may have"
                )
            return fh.read(MAX_TABLE_BYTES + 1)  # decode_table refuses the byte past the cap
    except OSError as exc:
        raise InputError(path, "", f"cannot read: {_why(path, exc)}") from None


def _kind(mode: int) -> str:
    kinds = [(stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device")]
    kinds += [(stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")]
    return next((name for test, name in kinds if test(mode)), "special file")


def _why(path: Path, exc: OSError) -> str:
    """An OSError in words; a dangling symbolic link says so (stat's 'No such file' alone puzzles)."""
    why = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError) and path.is_symlink():
        return f"{why} (a symbolic link to {os.readlink(path)!r}, which does not exist)"
    return why


def _write(path: Path, text: str) -> None:
    """Atomically (temp file + rename); a path that cannot take it (`--out` a directory, a
    read-only folder) is exit 2 and leaves no temp file behind."""
    if path.is_dir():
        raise InputError(path, "", "cannot write: is a directory (name the profile's YAML file)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(path, "", f"cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; a profile is as readable as any file written
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(path, "", f"cannot write: {exc.strerror or exc}") from None
