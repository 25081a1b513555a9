"""Real backends for the tests of every package: sshd and moto servers on 127.0.0.1, a tiny model,
a fork server for repeated `igniter` runs.

Every process started here is stopped at teardown; nothing listens beyond loopback, and AWS
credentials are fake with instance metadata lookups disabled, so boto3 never leaves 127.0.0.1.
"""

from __future__ import annotations

import getpass
import logging
import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autoscaler.demo.setup import tiny_model
from tests.kit import web
from tests.kit.forkrun import ForkRunner


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


@pytest.fixture(autouse=True, scope="session")
def _fake_aws() -> None:
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    os.environ.pop("AWS_PROFILE", None)


@pytest.fixture(autouse=True, scope="session")
def _private_lock_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`leader: local` locks live in one directory per host user; a test session (and every
    `igniter run` it starts) gets its own, so sessions running side by side never share a lock."""
    os.environ["IGNITER_LOCK_DIR"] = str(tmp_path_factory.mktemp("locks"))


@dataclass
class Moto:
    url: str

    def reset(self) -> None:
        web.post(f"{self.url}/moto-api/reset", timeout=10).raise_for_status()


def launch_image(client: Any) -> str:
    """A machine image to launch from, registered for the caller (moto's reset forgets it). Not
    the first of moto's own: listing its 1,366 default images costs 1.1 to 2.9 s of CPU a call,
    serialised and parsed as XML, and the suite looked one up 48 times (52 s of its CPU)."""
    return str(
        client.register_image(Name=f"igniter-test-{uuid.uuid4().hex[:12]}", RootDeviceName="/dev/xvda")["ImageId"]
    )


def _idempotent_run_instances() -> None:
    """EC2's documented ClientToken idempotency, which moto lacks: RunInstances repeated with a
    token already used answers with that request's reservation and starts nothing (moto's default
    token, "ABCDE" when the caller sends none, is not a token). In this process, where the
    threaded moto server runs."""
    from moto.ec2.models.instances import InstanceBackend

    original = InstanceBackend.run_instances
    if getattr(original, "idempotent", False):
        return

    def run_instances(self: Any, image_id: str, count: int, *args: Any, **kwargs: Any) -> Any:
        token = kwargs.get("client_token")
        if token and token != "ABCDE":
            for reservation in self.reservations.values():
                if any(getattr(i, "client_token", None) == token for i in reservation.instances):
                    return reservation
        return original(self, image_id, count, *args, **kwargs)

    run_instances.idempotent = True  # type: ignore[attr-defined]
    InstanceBackend.run_instances = run_instances  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Moto]:
    from moto.server import ThreadedMotoServer

    _idempotent_run_instances()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    wait_port(port)
    yield Moto(f"http://127.0.0.1:{port}")
    server.stop()


@pytest.fixture()
def moto(moto_server: Moto) -> Moto:
    moto_server.reset()
    return moto_server


@dataclass
class Sshd:
    port: int
    user: str
    key_file: Path
    known_hosts: Path
    dir: Path


SSHD_CONFIG = """Port {port}
ListenAddress 127.0.0.1
HostKey {dir}/host_ed25519
PidFile {dir}/sshd.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
LogLevel ERROR
"""


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(binary):
        pytest.fail("OpenSSH server (sshd) is not installed; .ci/run installs openssh-server")
    d = tmp_path_factory.mktemp("sshd")
    host_pub = _keygen(d / "host_ed25519")
    (d / "authorized_keys").write_text(_keygen(d / "user_ed25519") + "\n")
    port = free_port()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_pub.split()[:2])}\n")
    (d / "sshd_config").write_text(SSHD_CONFIG.format(port=port, dir=d))
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(d / "sshd_config")], stderr=open(d / "sshd.log", "wb"))
    try:
        wait_port(port)
        yield Sshd(port, getpass.getuser(), d / "user_ed25519", d / "known_hosts", d)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small TorchScript model (x [8] FP32 -> y [4] FP32) in the agent's model directory layout."""
    return tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def forked() -> Iterator[ForkRunner]:
    """`igniter` runs forked from one process per worker that imported the product
    (tests/kit/forkrun.py): for tests that run `igniter run --once` again and again, each run a
    real process (a fault point's kill -9 exits it with -9), without a fresh interpreter's 0.85 s
    of imports. No state passes from one run to the next: each forks the same freshly imported
    process."""
    runner = ForkRunner()
    yield runner
    runner.close()
