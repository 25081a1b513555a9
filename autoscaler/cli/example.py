"""`igniter example NAME [-o FILE]`: print (or write) a policy that ships with igniter, or the schema.

A pip install has no checkout to copy policies/example.yaml from, so the wheel carries the example
policies and policy.schema.json (pyproject.toml's data-files, into <prefix>/share/igniter/policies)
and this command hands them out: `igniter example policy > policy.yaml` is the quick start's first step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autoscaler.config.errors import InputError

EXAMPLES = {
    "policy": ("example.yaml", "the example policy: four workloads on local instances (the quick start)"),
    "azure-sim": ("azure-sim.yaml", "the policy the Azure Functions trace simulations use"),
    "servegen-sim": ("servegen-sim.yaml", "the policy the ServeGen trace simulations use"),
    "schema": ("policy.schema.json", "the policies' JSON schema, for editors (yaml-language-server)"),
}


def examples_dir(source_root: Path = Path(__file__).resolve().parents[2], prefix: Path = Path(sys.prefix)) -> Path:
    """policies/ beside the source tree (a checkout, an editable install), else the wheel's copy."""
    beside = source_root / "policies"
    return beside if (beside / "example.yaml").is_file() else prefix / "share" / "igniter" / "policies"


def register(subparsers: Any) -> argparse.ArgumentParser:
    listing = "; ".join(f"{name}: {what}" for name, (_, what) in EXAMPLES.items())
    p = subparsers.add_parser(
        "example", help="print an example policy or the policy schema", description=f"NAME is one of: {listing}."
    )
    p.add_argument("name", nargs="?", choices=EXAMPLES, metavar="NAME", help=", ".join(EXAMPLES))
    p.add_argument("-o", "--out", type=Path, help="write it to this new file instead of stdout (never overwrites)")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    if args.name is None:  # a newcomer's first try: say what there is, in one line (exit 2)
        listing = "; ".join(f"{name} - {what}" for name, (_, what) in EXAMPLES.items())
        print(f"igniter example: NAME is missing, one of: {listing}", file=sys.stderr)
        return 2
    source = examples_dir() / EXAMPLES[args.name][0]
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(source, "", f"cannot read the bundled file ({exc.strerror}); reinstall igniter") from None
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        with args.out.open("x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        raise InputError(args.out, "", "exists already: choose another name or remove it") from None
    except OSError as exc:
        raise InputError(args.out, "", f"cannot write: {exc.strerror}") from None
    print(f"wrote {args.out} ({args.name})", file=sys.stderr)
    return 0
