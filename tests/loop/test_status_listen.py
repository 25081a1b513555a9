"""scaling.status_listen (any loopback or private address, never a public one or a name) and the
bearer token that protects /v1/*; the older scaling.status_port keeps working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from autoscaler.config.listen import parse_listen
from autoscaler.loop.status.server import StatusServer, StatusState
from tests.conftest import run_cli
from tests.fleet.test_ec2 import policy_file, setup_templates
from tests.kit import web
from tests.kit.backends import Moto, free_port
from tests.kit.control import REPO, write_policy
from tests.loop.test_service import wait_for

TOKEN = "s3cret-token-0123456789"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("10.0.1.5:9464", ("10.0.1.5", 9464)),  # the host's VPC address: Prometheus in the VPC scrapes it
        ("192.168.7.3:0", ("192.168.7.3", 0)),
        ("0.0.0.0:9464", ("0.0.0.0", 9464)),
        ("[::1]:9464", ("::1", 9464)),
        ("[fd00::5]:9100", ("fd00::5", 9100)),
    ],
)
def test_loopback_and_private_addresses_are_accepted(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("8.8.8.8:9464", "8.8.8.8 is a public address"),
        ("localhost:9464", "'localhost' is not an IP address"),
        ("9464", "expected HOST:PORT"),
        ("127.0.0.1:70000", "is not a TCP port"),
        ("127.0.0.1:http", "is not a TCP port"),
    ],
)
def test_bad_listen_addresses_exit_2_naming_the_field(igniter, tmp_path: Path, value: str, message: str) -> None:
    path = write_policy(tmp_path / "policy.yaml", scaling={"status_listen": value})
    res = igniter("validate", path)
    assert res.code == 2 and f"{path}: scaling.status_listen: " in res.err and message in res.err, res.err


@pytest.mark.unit
def test_status_listen_and_status_port_together_are_refused(igniter, tmp_path: Path) -> None:
    path = write_policy(tmp_path / "policy.yaml", scaling={"status_listen": "127.0.0.1:9000", "status_port": 9001})
    res = igniter("validate", path)
    assert res.code == 2 and f"{path}: scaling.status_port: give scaling.status_listen only" in res.err


@pytest.mark.unit
def test_the_token_guards_v1_only() -> None:
    server = StatusServer(StatusState(), 0, "127.0.0.1", TOKEN).start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        for path in ("/v1/plan", "/v1/fleet", "/v1/leader", "/v1/nope"):
            denied = web.get(url + path, timeout=5)
            assert denied.status_code == 401 and denied.headers["WWW-Authenticate"].startswith("Bearer")
            wrong = web.get(url + path, headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"}, timeout=5)
            assert wrong.status_code == 401
        ok = web.get(url + "/v1/plan", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
        assert ok.status_code == 200 and ok.json()["layout"] is None
        assert web.get(url + "/healthz", timeout=5).status_code == 200
        assert "igniter_leader" in web.get(url + "/metrics", timeout=5).text
    finally:
        server.close()


@pytest.mark.e2e
def test_run_listens_where_the_policy_says_with_the_token(moto: Moto, tmp_path: Path) -> None:
    """127.0.0.2 is loopback but not 127.0.0.1: the host part of status_listen is the one bound."""
    setup_templates(moto)
    port = free_port()
    token_file = tmp_path / "status.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    path = policy_file(
        tmp_path, moto, status_listen=f"127.0.0.2:{port}", status_token_file="status.token", interval_s=1
    )
    cmd = [sys.executable, "-m", "autoscaler", "run", str(path), "--state", str(tmp_path / "s.sqlite")]
    log = tmp_path / "run.log"
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=open(log, "wb"))
    try:
        url = f"http://127.0.0.2:{port}"
        wait_for(lambda: web.get(url + "/healthz", timeout=2).status_code == 200, 60, "the status endpoint")
        assert web.get(url + "/v1/fleet", timeout=5).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        fleet = wait_for(
            lambda: (f := web.get(url + "/v1/fleet", headers=auth, timeout=5).json())["instances"] and f,
            60,
            "the fleet",
        )
        assert fleet["fleet"] == "prod"
        with pytest.raises(httpx.ConnectError):
            web.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
        assert f"status on http://127.0.0.2:{port}" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.e2e
def test_a_token_file_that_cannot_be_read_exits_2(moto: Moto, tmp_path: Path) -> None:
    path = policy_file(tmp_path, moto, status_token_file="missing.token")
    res = run_cli("run", path, "--state", tmp_path / "s.sqlite", "--status-port", free_port())
    assert res.code == 2 and f"{path}: scaling.status_token_file: cannot read" in res.err, res.err
    (tmp_path / "missing.token").write_text("short\n")
    res = run_cli("run", path, "--state", tmp_path / "s.sqlite", "--status-port", free_port())
    assert res.code == 2 and "at least 16 characters" in res.err


@pytest.mark.e2e
def test_the_older_status_port_still_binds_127_0_0_1(moto: Moto, tmp_path: Path) -> None:
    setup_templates(moto)
    port = free_port()
    path = policy_file(tmp_path, moto, status_port=port, interval_s=1)
    cmd = [sys.executable, "-m", "autoscaler", "run", str(path), "--state", str(tmp_path / "s.sqlite")]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: web.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200, 60, "status")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
