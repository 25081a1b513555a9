"""`leader: local` across users: the lock directory is host-wide by default (not under $HOME), so
two users' autoscalers of one fleet find one lock, and a user who did not create a fleet's lock
file never leads it (it could not write its fencing token)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from autoscaler.leader.local import HOST_LOCK_DIR, LocalLease
from autoscaler.loop.service.wiring import lock_dir
from tests.kit.control import REPO, make_policy

pytestmark = pytest.mark.unit

NOBODY = 65534
SYSTEM_PYTHON = (
    "/usr/bin/python3"  # the venv's interpreter may sit under /root (0700); this module needs only the stdlib
)
ATTEMPT = """
import sys
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from autoscaler.leader.base import LeaseError
from autoscaler.leader.local import LocalLease
try:
    print(LocalLease(Path(sys.argv[1]), "nobody").attempt(0.0).leader)
except LeaseError as exc:
    print("refused:", exc)
"""


def test_the_default_lock_dir_is_the_same_for_every_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IGNITER_LOCK_DIR", raising=False)
    policy = make_policy(tmp_path)
    seen = set()
    for home in ("/home/alice", "/home/bob"):
        monkeypatch.setenv("HOME", home)
        seen.add(lock_dir(policy))
    assert seen == {HOST_LOCK_DIR}


def test_the_host_wide_directory_is_made_like_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    base = Path(tempfile.mkdtemp(prefix="igniter-host-locks-"))
    try:
        monkeypatch.setattr("autoscaler.leader.local.HOST_LOCK_DIR", base / "igniter-locks")
        lease = LocalLease(base / "igniter-locks" / "fleet.lock", "me")
        assert lease.attempt(0.0).leader
        lease.release()
        assert stat.S_IMODE((base / "igniter-locks").stat().st_mode) == 0o1777
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.e2e
@pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="needs root (to act as a second user) and python3",
)
def test_a_second_user_never_leads_a_fleet_the_first_one_locks() -> None:
    base = Path(tempfile.mkdtemp(prefix="igniter-two-users-"))  # pytest's tmp_path is private to root
    try:
        base.chmod(0o755)
        (base / "locks").mkdir()
        (base / "locks").chmod(0o1777)  # as the host-wide directory is made
        _second_user(base / "locks", _lease_code(base / "code"))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _lease_code(dest: Path) -> Path:
    """The modules ATTEMPT imports, copied where the second user can read them: the checkout may
    sit in a directory only root can enter (`mktemp -d` makes it 0700)."""
    for rel in (
        "autoscaler/__init__.py",
        "autoscaler/leader/__init__.py",
        "autoscaler/leader/base.py",
        "autoscaler/leader/local.py",
    ):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / rel, dest / rel)
    return dest


def _second_user(shared: Path, code: Path) -> None:
    path = shared / "fleet.lock"
    first = LocalLease(path, "root")
    assert first.attempt(0.0).leader
    assert stat.S_IMODE(path.stat().st_mode) == 0o600

    def as_nobody() -> str:
        done = subprocess.run(
            [SYSTEM_PYTHON, "-c", ATTEMPT, str(path), str(code)],
            cwd="/",
            capture_output=True,
            text=True,
            timeout=60,
            user=NOBODY,
            env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    refusal = f"refused: cannot open the lock file {path}: Permission denied (it belongs to user root (uid 0)"
    assert as_nobody().startswith(refusal)
    first.release()
    assert as_nobody().startswith(refusal)  # free, and still not nobody's to lead
