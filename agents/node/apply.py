"""`igniter-agent apply`: validate an assignment and hand it to the daemon atomically.

The daemon only ever sees a complete file (temp file + rename). Generations only move forward,
so a delayed or retried apply from the autoscaler cannot roll a VM back; re-sending the same
assignment is a harmless no-op (SSH retries are safe).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from agents.errors import InputError
from agents.fsutil import atomic_write_text, open_private, read_json
from agents.node.caps import check_caps, node_caps
from agents.node.daemon import ASSIGNMENT_FILE
from agents.node.mig_check import check_slices, inventory
from agents.spec import Assignment, check_model_dirs, parse_assignment

APPLY_LOCK = "apply.lock"


def current(state_dir: Path) -> Assignment | None:
    """The assignment handed over last, if it is there and valid."""
    data = read_json(state_dir / ASSIGNMENT_FILE)
    if not isinstance(data, dict):
        return None
    try:
        return Assignment.model_validate(data)
    except ValueError:
        return None


def _check_order(new: Assignment, old: Assignment | None, source: str) -> bool:
    """True when new is worth writing; raise when it would move the generation backwards."""
    if old is None or new.generation > old.generation:
        return True
    if new.generation == old.generation and new == old:
        return False
    if new.generation == old.generation:
        raise InputError(
            source,
            "generation",
            f"generation {new.generation} was already applied with other servers; use a higher generation",
        )
    raise InputError(
        source,
        "generation",
        f"{new.generation} is older than the current generation {old.generation} (use --force to go back)",
    )


def apply_assignment(
    state_dir: Path, text: str | bytes, source: str, force: bool = False, check_models: bool = True
) -> tuple[Assignment, bool]:
    """Validate and write; returns the assignment and whether anything changed. Raises InputError."""
    assignment = parse_assignment(text, source)
    gpus = inventory(state_dir)
    check_caps(assignment, source, node_caps(gpus))
    if any(s.mig_slice() is not None for s in assignment.servers):
        check_slices(assignment, source, gpus)
    if check_models:
        check_model_dirs(assignment, source)
    with os.fdopen(open_private(state_dir / APPLY_LOCK), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and not _check_order(assignment, current(state_dir), source):
            return assignment, False
        atomic_write_text(state_dir / ASSIGNMENT_FILE, assignment.model_dump_json(indent=1) + "\n", durable=True)
    return assignment, True
