"""Servers forked from the zygote (agents/node/zygote.py) against a real `igniter-agent run --no-gpu`:
what the agent and the tools on the node see of them is what they see of an exec'd server, and the
zygote's life is tied to the agent's both ways."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from agents.node.env_clients import processes_with
from agents.node.zygote import forks, parent_of
from tests.kit.agent import Agent, alive, free_port, port_open, server_argv, server_spec, wait_until


@pytest.mark.unit
@pytest.mark.parametrize(
    ("start", "device", "forked"),
    [("auto", "cpu", True), ("auto", "cuda", False), ("fork", "cuda", True), ("exec", "cpu", False)],
)
def test_auto_forks_only_on_a_cpu_node(start: str, device: str, forked: bool) -> None:
    assert forks(start, device) is forked


@pytest.mark.e2e
def test_forked_servers_share_one_zygote_and_read_as_exec_d_ones(agent: Agent, cnn_dir: Path) -> None:
    specs = [server_spec(n, cnn_dir, free_port()) for n in ("a", "b")]
    agent.apply(specs)
    servers = agent.servers()
    zygotes = {parent_of(s["pid"]) for s in servers.values()}
    assert len(zygotes) == 1 and parent_of(zygotes.pop()) == agent.proc.pid
    argv = server_argv(servers["a"]["pid"])  # its title: ps and pkill -f see the exec'd command line
    assert argv[1:3] == ["-m", "agents.server"] and argv[argv.index("--stats-file") + 1].endswith("run/a.stats.json")
    assert os.getsid(servers["a"]["pid"]) == servers["a"]["pid"]  # a session of its own, as start_new_session
    log = (agent.state_dir / "logs" / "a.log").read_text()
    assert "ready on" in log  # its stdout and stderr are its own log file
    # the fakes of MPS and MIG find their clients by the environment CUDA reads: a forked server's
    # is in its stats, not in /proc/PID/environ (the zygote's)
    users = processes_with("CUDA_VISIBLE_DEVICES", "", agent.state_dir.resolve() / "run")
    assert {s["pid"] for s in servers.values()} <= set(users)


@pytest.mark.e2e
def test_a_killed_zygote_takes_its_servers_and_the_agent_starts_both_again(make_agent, cnn_dir: Path) -> None:
    agent = make_agent("--backoff-initial", "0.1")
    spec = server_spec("a", cnn_dir, free_port())
    agent.apply([spec])
    first = agent.servers()["a"]
    zygote = parent_of(first["pid"])
    os.kill(zygote, signal.SIGKILL)
    wait_until(lambda: not alive(first["pid"]), 5, "the server to die with its zygote")

    def back() -> dict | None:
        s = agent.servers()["a"]
        return s if s["state"] == "ready" and s["pid"] not in (None, first["pid"]) else None

    again = wait_until(back, 30, "the server to be ready in a new process")
    assert again["last_error"] == "killed by SIGKILL" and again["restarts"] == 1
    assert parent_of(again["pid"]) not in (zygote, agent.proc.pid)  # a new zygote
    assert port_open(spec["port"])
