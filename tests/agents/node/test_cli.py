"""End to end: real `igniter-agent` processes (--no-gpu) running real servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.kit import web
from tests.kit.agent import Agent, agent_cmd, alive, free_port, port_open, server_spec, wait_until

pytestmark = pytest.mark.e2e

TOP_LEVEL = {"generation", "gpu_available", "gpus", "servers", "agent_pid", "updated_at"}
PER_SERVER = {
    "name",
    "state",
    "pid",
    "port",
    "restarts",
    "requests_total",
    "batches_total",
    "latency_ms_p50",
    "latency_ms_p99",
    "last_error",
}


def _infer(port: int, workload: str) -> httpx.Response:
    body = {"inputs": [{"name": "x", "shape": [1, 3, 8, 8], "datatype": "FP32", "data": [0.1] * 192}]}
    return web.post(f"http://127.0.0.1:{port}/v2/models/{workload}/infer", json=body, timeout=30)


def test_apply_serves_and_status_json_has_the_contract_shape(agent: Agent, cnn_dir: Path) -> None:
    spec = server_spec("a", cnn_dir, free_port())
    agent.apply([spec])
    assert _infer(spec["port"], "a-w").status_code == 200
    status = wait_until(lambda: (s := agent.status())["servers"][0]["requests_total"] == 1 and s, 5, "request counted")
    assert TOP_LEVEL <= status.keys()
    assert (status["generation"], status["gpu_available"], status["gpus"], status["agent_pid"]) == (
        1,
        False,
        [],
        agent.proc.pid,
    )
    server = status["servers"][0]
    assert PER_SERVER <= server.keys()
    assert (server["name"], server["state"], server["port"], server["restarts"], server["batches_total"]) == (
        "a",
        "ready",
        spec["port"],
        0,
        1,
    )
    assert server["latency_ms_p50"] > 0 and server["last_error"] is None and alive(server["pid"])
    assert isinstance(status["updated_at"], float) and status["agent_running"] is True
    human = agent.cli("status", "--state-dir", str(agent.state_dir))
    assert human.returncode == 0 and "agent running" in human.stdout and "ready" in human.stdout


def test_kill_9_of_a_server_brings_it_back_ready_with_one_restart(agent: Agent, cnn_dir: Path) -> None:
    spec = server_spec("a", cnn_dir, free_port())
    agent.apply([spec])
    old = agent.servers()["a"]["pid"]
    os.kill(old, signal.SIGKILL)
    back = wait_until(lambda: (s := agent.servers()["a"])["state"] == "ready" and s["pid"] != old and s, 30, "restart")
    assert back["restarts"] == 1 and back["last_error"] == "killed by SIGKILL"
    assert _infer(spec["port"], "a-w").status_code == 200


def test_a_changed_assignment_touches_only_what_changed(agent: Agent, cnn_dir: Path) -> None:
    keep, change, drop = (server_spec(n, cnn_dir, free_port(), batch=2) for n in ("keep", "change", "drop"))
    agent.apply([keep, change, drop])
    before = agent.servers()
    added = server_spec("added", cnn_dir, free_port(), batch=2)
    agent.apply([keep, dict(change, batch=4), added])
    after = agent.servers()
    assert list(after) == ["keep", "change", "added"] and {s["state"] for s in after.values()} == {"ready"}
    assert after["keep"]["pid"] == before["keep"]["pid"]
    assert after["change"]["pid"] != before["change"]["pid"] and after["change"]["restarts"] == 0
    assert not alive(before["drop"]["pid"]) and not alive(before["change"]["pid"])
    assert not port_open(drop["port"])


def test_a_bad_assignment_is_rejected_and_nothing_stops(agent: Agent, cnn_dir: Path) -> None:
    spec = server_spec("a", cnn_dir, free_port())
    agent.apply([spec])
    before = agent.status()
    bad = json.dumps({"generation": 2, "servers": [dict(spec, batch=0)]})
    done = agent.cli("apply", "--state-dir", str(agent.state_dir), "-", stdin=bad)
    assert (
        done.returncode == 2
        and done.stderr.strip() == "<stdin>: servers[0].batch: Input should be greater than or equal to 1"
    )
    after = agent.status()
    assert after["generation"] == 1 and after["servers"][0]["pid"] == before["servers"][0]["pid"]
    assert after["servers"][0]["state"] == "ready" and _infer(spec["port"], "a-w").status_code == 200


def test_sigterm_leaves_no_server_process_and_no_open_port(agent: Agent, cnn_dir: Path) -> None:
    specs = [server_spec(n, cnn_dir, free_port()) for n in ("a", "b")]
    agent.apply(specs)
    pids = agent.server_pids()
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(15) == 0
    assert not any(alive(pid) for pid in pids)
    assert not any(port_open(s["port"]) for s in specs)
    assert {s["state"] for s in agent.status()["servers"]} == {"stopped"}


def test_kill_9_of_the_agent_leaves_no_server_alive(agent: Agent, cnn_dir: Path) -> None:
    specs = [server_spec(n, cnn_dir, free_port()) for n in ("a", "b")]
    agent.apply(specs)
    pids = agent.server_pids()
    agent.proc.kill()
    agent.proc.wait(5)
    wait_until(lambda: not any(alive(pid) for pid in pids), 5, "servers to die with their agent")
    wait_until(lambda: not any(port_open(s["port"]) for s in specs), 5, "ports to close")
    assert agent.status()["agent_running"] is False


def test_failed_server_is_reported_and_the_next_assignment_retries_it(
    make_agent, cnn_dir: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.pt").write_bytes(b"not a torchscript archive")
    (broken / "model.yaml").write_text((cnn_dir / "model.yaml").read_text())
    agent = make_agent("--backoff-initial", "0.01")
    spec = server_spec("b", broken, free_port())
    agent.apply([spec], wait=None)
    # without --wait, apply returns before the daemon's next loop picks the assignment up
    failed = wait_until(lambda: (s := agent.servers().get("b", {})).get("state") == "failed" and s, 60, "failed state")
    assert failed["restarts"] == 4 and failed["pid"] is None
    assert (
        failed["last_error"]
        == f"exited with code 1: ValueError: {broken}/model.pt is not a TorchScript archive (torch.jit.save writes a zip file)"
    )
    (broken / "model.pt").write_bytes((cnn_dir / "model.pt").read_bytes())
    agent.apply([spec])  # same spec, next generation: a fresh start
    assert agent.servers()["b"]["restarts"] == 0


def test_second_agent_on_the_same_state_dir_is_refused(agent: Agent) -> None:
    wait_until(lambda: agent.status()["agent_running"], 10, "agent up")
    done = subprocess.run(
        agent_cmd("run", "--state-dir", str(agent.state_dir), "--no-gpu"), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1 and "another igniter-agent" in done.stderr


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [
        (
            "--max-request-items",
            "0",
            "igniter-agent run: --max-request-items: Input should be greater than or equal to 1",
        ),
        (
            "--max-request-items",
            "5000",
            "igniter-agent run: --max-request-items: Input should be less than or equal to 4096",
        ),
        ("--max-header-kb", "0", "igniter-agent run: --max-header-kb: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_server_limit_is_exit_2_naming_the_flag_and_creates_nothing(
    tmp_path: Path, flag: str, value: str, expected: str
) -> None:
    state = tmp_path / "st"
    done = subprocess.run(
        agent_cmd("run", "--state-dir", str(state), "--no-gpu", flag, value), capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr.strip()) == (2, expected)
    assert not state.exists()


def _apply_file(tmp_path: Path, doc: object, *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "assignment.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return subprocess.run(
        agent_cmd("apply", "--state-dir", str(tmp_path / "state"), str(path), *extra),
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["servers"][0].update(batch=0), "servers[0].batch: Input should be greater than or equal to 1"),
        (lambda d: d["servers"][0].update(gpu="v100"), "servers[0].gpu: unknown key (check the spelling)"),
        (
            lambda d: d["servers"].append(dict(d["servers"][0], name="b")),
            "servers[1].port: duplicate port 8101 (also servers[0])",
        ),
        (
            lambda d: d["servers"][0].update(model_dir="/nonexistent"),
            "servers[0].model_dir: /nonexistent/model.pt does not exist",
        ),
        (lambda d: d.update(generation=-1), "generation: Input should be greater than or equal to 0"),
    ],
)
def test_apply_exits_2_naming_the_field(tmp_path: Path, cnn_dir: Path, mutate, expected: str) -> None:
    doc = {"generation": 1, "servers": [server_spec("a", cnn_dir, 8101)]}
    mutate(doc)
    done = _apply_file(tmp_path, doc)
    assert done.returncode == 2
    assert done.stderr.strip() == f"{tmp_path / 'assignment.json'}: {expected}"
    assert "Traceback" not in done.stderr and not (tmp_path / "state" / "assignment.json").exists()


def test_apply_orders_generations(tmp_path: Path, cnn_dir: Path) -> None:
    doc = {"generation": 5, "servers": [server_spec("a", cnn_dir, 8101)]}
    assert _apply_file(tmp_path, doc).returncode == 0
    assert "unchanged" in _apply_file(tmp_path, doc).stdout
    older = _apply_file(tmp_path, dict(doc, generation=4))
    assert older.returncode == 2 and "generation: 4 is older than the current generation 5" in older.stderr
    same_gen_other = _apply_file(tmp_path, dict(doc, servers=[]))
    assert same_gen_other.returncode == 2 and "already applied with other servers" in same_gen_other.stderr
    assert _apply_file(tmp_path, dict(doc, generation=4), "--force").returncode == 0
    assert json.loads((tmp_path / "state" / "assignment.json").read_text())["generation"] == 4


def test_apply_of_unreadable_or_invalid_json_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        agent_cmd("apply", "--state-dir", str(tmp_path), str(tmp_path / "missing.json")),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and done.stderr.startswith(f"{tmp_path / 'missing.json'}: cannot read")
    done = _apply_file(tmp_path, '{"generation": 1,')
    assert done.returncode == 2 and "line 1: invalid JSON" in done.stderr and "Traceback" not in done.stderr


def test_status_without_an_agent_has_the_same_shape(tmp_path: Path) -> None:
    done = subprocess.run(
        agent_cmd("status", "--state-dir", str(tmp_path), "--json"), capture_output=True, text=True, timeout=30
    )
    status = json.loads(done.stdout)
    assert done.returncode == 0 and TOP_LEVEL <= status.keys()
    assert (status["generation"], status["servers"], status["gpus"], status["agent_running"]) == (None, [], [], False)


def _has_gpu() -> bool:
    from agents.node.gpu import NvmlMonitor

    monitor = NvmlMonitor()
    try:
        return monitor.available()
    finally:
        monitor.close()


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: profile would really run")
def test_profile_without_a_gpu_exits_2(tmp_path: Path, cnn_dir: Path) -> None:
    done = subprocess.run(
        agent_cmd("profile", "--model-dir", str(cnn_dir), "--out", str(tmp_path / "p.yaml")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "needs a real NVIDIA GPU" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "p.yaml").exists()


def test_status_answers_without_importing_the_other_commands(tmp_path: Path) -> None:
    """The controller runs `igniter-agent status` on every node every tick: it imports neither the
    daemon nor pydantic (agents/cli.py), and answers what the full parser's command answers."""
    heavy = "('agents.commands', 'agents.node.daemon', 'agents.spec', 'pydantic', 'rich')"
    light = (
        "import sys; from agents.cli import main; rc = main(['status', '--state-dir', sys.argv[1], '--json']); "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {heavy} or m in {heavy}), rc, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", light, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.stderr.strip() == "[] 0"
    assert json.loads(done.stdout)["agent_running"] is False
    full = (
        "import sys; from agents.commands import main; sys.exit(main(['status', '--state-dir', sys.argv[1], '--json']))"
    )
    assert (
        subprocess.run([sys.executable, "-c", full, str(tmp_path)], capture_output=True, text=True).stdout
        == done.stdout
    )
    bad = subprocess.run(agent_cmd("status", "--json"), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--state-dir" in bad.stderr
