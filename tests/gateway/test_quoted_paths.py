"""A local gateway whose state directory has a space in its path starts and answers (haproxy.cfg
quotes its paths); and `igniter run --once` whose gateway cannot start exits 1, not 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autoscaler.gateway.base import GatewaySpec
from autoscaler.gateway.local import LocalHaproxy
from tests.kit import web
from tests.kit.agent import free_port
from tests.kit.control import REPO

pytestmark = pytest.mark.e2e


def test_a_state_directory_with_a_space_works(tmp_path: Path) -> None:
    gw = LocalHaproxy(tmp_path / "my fleet" / "gateway #1")
    spec = GatewaySpec(listen=f"127.0.0.1:{free_port()}", workloads=("w",))
    try:
        assert gw.ensure(spec)
        assert gw.running() and gw.observe().backends.keys() == {"w"}
        live = web.get(f"http://{spec.listen}/v2/health/live", timeout=5)
        assert live.status_code == 200
    finally:
        gw.stop()


def test_once_exits_1_when_its_gateway_cannot_start(tmp_path: Path) -> None:
    broken = tmp_path / "haproxy"
    broken.write_text("#!/bin/sh\necho '[ALERT] (1) : cannot do it' >&2\nexit 1\n")
    broken.chmod(0o755)
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "fleet": "once-gw",
                "instance_types": [{"name": "p3.2xlarge", "gpu": "v100", "gpus": 1, "price_per_hour": 3.06}],
                "workloads": [{"name": "a", "model": "alexnet", "slo_ms": 15, "rate_rps": 0}],
                "agents": {"transport": "none"},
                "gateway": {"kind": "haproxy", "listen": f"127.0.0.1:{free_port()}", "haproxy_command": str(broken)},
                "provider": {"kind": "local", "state_root": str(tmp_path / "inst")},
                "leader": {"kind": "local", "lock_dir": str(tmp_path / "locks")},
            }
        )
    )
    cmd = [sys.executable, "-m", "autoscaler", "run", str(policy), "--once", "--state", str(tmp_path / "s.sqlite")]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "gateway: cannot check the configuration of the gateway: cannot do it" in done.stderr
