"""Node CPU per agent status call, before and after (issue 50 item 2): `igniter-agent status --json`
(a Python process on the node per call) against reading the status.json the agent's daemon keeps
current (`date` + `cat` on the pooled SSH connection; in-process for the local transport).

One real agent (`igniter-agent run --no-gpu`) on this machine, asked two ways:

- ssh: a real OpenSSH sshd on 127.0.0.1 and one pooled paramiko connection (SshTransport). The
  node's CPU is that of the sshd process tree: the listener, the connection's sshd processes and
  every process they start (the login shell, igniter-agent, date, cat), read from /proc (psutil:
  each live process's own CPU plus that of the children it reaped), over N calls on a connection
  opened before. "before" runs the old command line (`SshTransport.command("status")`, what the
  transport ran first) over the same connection; "channel" reads status.json as the transport
  did next, a session opened per read (`date +%s; exec cat`); "after" is `SshTransport.status`,
  the same read in a shell loop on a session kept open (one round trip a read).
- local: LocalTransport, the node being this machine. "before" runs `igniter-agent status --json`
  as the old LocalTransport did (subprocess, the agent's environment); "after" is
  `LocalTransport.status`. The node's CPU is RUSAGE_CHILDREN (the processes the calls start) plus
  this process's own CPU in the calls (the in-process read counts in full).

Every SSH command runs in the node user's login shell, and bash run by sshd sources ~/.bashrc:
here root's runs `pyenv init` (about 90 ms of CPU per command, whatever the command). A node's
agent user (cloud-init, /bin/bash, the stock ~/.bashrc that returns at once when not interactive)
pays nothing of the kind, so SSH is measured twice: with this machine's shell as it is ("rc"),
and with a second sshd that sets SHLVL=1 in the session (`SetEnv`), which makes bash skip
~/.bashrc ("plain"), as on a node. "floor" is `true` over the same connection: the cost of any
command at all.

Each figure is the median over --runs runs of --calls calls (the ways alternate, so drift in the
machine's load hits all). Also the wall time per call and the controller's own CPU per call
(paramiko's side of the SSH calls). About 3.5 minutes on 2 loaded cores.

    nice .venv/bin/python benchmarks/agent_call.py [--calls 20] [--runs 5]
"""

from __future__ import annotations

import argparse
import functools
import getpass
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import Results  # noqa: E402

from agents.launch import agent_env, resolve_agent_command  # noqa: E402
from autoscaler.config.policy import AgentsConfig  # noqa: E402
from autoscaler.fleet.base import Instance  # noqa: E402
from autoscaler.transport.base import parse_status  # noqa: E402
from autoscaler.transport.local import LocalTransport, agent_args, parse_reply  # noqa: E402
from autoscaler.transport.ssh import SshTransport  # noqa: E402
from autoscaler.transport.status_file import STATUS_FILE  # noqa: E402
from tests.kit.backends import SSHD_CONFIG, _keygen, free_port, wait_port  # noqa: E402

AGENT = resolve_agent_command("igniter-agent")
Call = Callable[[], object]


@contextmanager
def sshd(d: Path, extra: str = "") -> Iterator[tuple[int, psutil.Process, AgentsConfig]]:
    """An OpenSSH sshd on 127.0.0.1 (as the tests' fixture starts it, plus `extra` config lines)
    and the agents config to reach it."""
    d.mkdir()
    host_pub = _keygen(d / "host_ed25519")
    (d / "authorized_keys").write_text(_keygen(d / "user_ed25519") + "\n")
    port = free_port()
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_pub.split()[:2])}\n")
    (d / "sshd_config").write_text(SSHD_CONFIG.format(port=port, dir=d) + extra)
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(d / "sshd_config")], stderr=open(d / "sshd.log", "wb"))
    try:
        wait_port(port)
        cfg = AgentsConfig.model_validate(
            {
                "transport": "ssh",
                "user": getpass.getuser(),
                "key_file": str(d / "user_ed25519"),
                "known_hosts": str(d / "known_hosts"),
                "port": port,
                "host_override": "127.0.0.1",
                "agent_command": " ".join(AGENT),
                "state_dir": str(d.parent / "agent"),
            }
        )
        yield port, psutil.Process(proc.pid), cfg
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def agent(state_dir: Path) -> Iterator[psutil.Process]:
    """A real agent, waited for until its first status is written."""
    proc = subprocess.Popen(
        [*AGENT, "run", "--state-dir", str(state_dir), "--no-gpu"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=open(state_dir.parent / "agent.log", "wb"),
    )
    try:
        deadline = time.monotonic() + 60
        while not (state_dir / "status.json").exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"the agent did not start: see {state_dir.parent / 'agent.log'}")
            time.sleep(0.1)
        yield psutil.Process(proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)


def tree_cpu(root: psutil.Process) -> float:
    """CPU seconds of a process tree: each live process's own and its reaped children's."""
    total = 0.0
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:  # exited between the listing and the read: its parent reaps it
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def local_cpu() -> float:
    """The processes this one started and reaped, plus this one's own CPU."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime + time.process_time()


def measure(call: Call, calls: int, node: Callable[[], float]) -> tuple[float, float, float]:
    """(node CPU ms, controller CPU ms, wall ms) per call over `calls` calls."""
    node0, own0, wall0 = node(), time.process_time(), time.perf_counter()
    for _ in range(calls):
        call()
    node1, own1, wall1 = node(), time.process_time(), time.perf_counter()
    return tuple(1000 * x / calls for x in (node1 - node0, own1 - own0, wall1 - wall0))  # type: ignore[return-value]


def old_local_status(argv: list[str], state_dir: Path) -> object:
    """What LocalTransport.status ran until now: `igniter-agent status --json`, one process a call."""
    proc = subprocess.run(
        [*argv, *agent_args("status", str(state_dir))],
        input="",
        text=True,
        capture_output=True,
        env=agent_env(),
        timeout=60,
        check=False,
    )
    return parse_reply("status", proc.returncode, proc.stdout, proc.stderr, "local")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    res = Results("agent_call", "nice .venv/bin/python benchmarks/agent_call.py " + " ".join(sys.argv[1:]))
    with tempfile.TemporaryDirectory(prefix="agent-call-") as tmp:
        d = Path(tmp)
        state = d / "agent"
        state.mkdir(mode=0o700)
        inst = Instance(
            id="i-bench", instance_type="t", slot="s", state="running", launched_at=0.0, state_dir=str(state)
        )
        with (
            sshd(d / "rc") as (_, rc_sshd, rc_cfg),
            sshd(d / "plain", "SetEnv SHLVL=1\n") as (_, plain_sshd, plain_cfg),
            agent(state) as daemon,
        ):
            rc, plain = SshTransport(rc_cfg), SshTransport(plain_cfg)
            local = LocalTransport(rc_cfg.agent_command, str(state))
            old_ssh_line = rc.command("status", str(state))
            path = shlex.quote(str(state / STATUS_FILE))
            channel_line = f"[ -e {path} ] || exit 3; date +%s; exec cat -- {path}"  # a session per read
            ways: dict[str, tuple[Call, Callable[[], float]]] = {}
            for shell, ssh, listener in (("rc", rc, rc_sshd), ("plain", plain, plain_sshd)):
                node = functools.partial(tree_cpu, listener)
                ways[f"ssh-{shell} floor"] = (functools.partial(ssh.run, inst, "true", None), node)
                ways[f"ssh-{shell} before"] = (functools.partial(ssh._call, inst, "status", None), node)
                ways[f"ssh-{shell} channel"] = (functools.partial(ssh.run, inst, channel_line, None), node)
                ways[f"ssh-{shell} after"] = (functools.partial(ssh.status, inst), node)
            ways["local before"] = (functools.partial(old_local_status, local.argv, state), local_cpu)
            ways["local after"] = (functools.partial(local.status, inst), local_cpu)
            for name, (call, _) in ways.items():  # warm: each connection opened, each answer a live agent's
                assert name.endswith(("floor", "channel")) or parse_status(call()).running, name
            assert set(rc.status(inst)) == set(rc._call(inst, "status", None)), "the two documents differ"
            daemon_cpu0, started = sum(daemon.cpu_times()[:2]), time.perf_counter()
            samples: dict[str, list[tuple[float, float, float]]] = {k: [] for k in ways}
            for run in range(args.runs):
                for name, (call, node) in ways.items():
                    samples[name].append(measure(call, args.calls, node))
                print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
            daemon_cpu_s = (sum(daemon.cpu_times()[:2]) - daemon_cpu0) / (time.perf_counter() - started)
            rc.close()
            plain.close()
    res.doc["old_ssh_command"] = old_ssh_line
    res.line("calls", f"{args.runs} runs x {args.calls} calls, medians; one real agent (--no-gpu), sshd on 127.0.0.1")
    res.line("calls", "")
    res.line("calls", "| transport | status read | node CPU per call | controller CPU per call | wall per call |")
    res.line("calls", "| --- | --- | ---: | ---: | ---: |")
    med: dict[str, tuple[float, float, float]] = {}
    for name, runs in samples.items():
        med[name] = tuple(statistics.median(r[i] for r in runs) for i in range(3))  # type: ignore[assignment]
        way, when = name.split()
        how = {
            "floor": "`true` (any command)",
            "before": "`igniter-agent status --json`",
            "channel": "status.json, a session per read",
        }.get(when, "status.json" + (", a kept-open session" if way.startswith("ssh") else ""))
        node_ms, own_ms, wall_ms = med[name]
        res.line("calls", f"| {way} | {how} | {node_ms:.2f} ms | {own_ms:.2f} ms | {wall_ms:.1f} ms |")
        key = name.replace(" ", "_").replace("-", "_")
        res.figure(f"{key}_node_cpu_ms", node_ms)
        res.figure(f"{key}_controller_cpu_ms", own_ms)
        res.figure(f"{key}_wall_ms", wall_ms)
    for way in ("ssh-rc", "ssh-plain", "local"):
        before, after = med[f"{way} before"][0], med[f"{way} after"][0]
        if after > 0:
            res.figure(f"{way.replace('-', '_')}_node_cpu_ratio", before / after)
    res.figure("agent_daemon_cpu_ms_per_s", 1000 * daemon_cpu_s)
    res.line("calls", "")
    res.line(
        "calls",
        f"the agent daemon itself (idle, writing status.json each 0.5 s loop): {1000 * daemon_cpu_s:.1f} ms CPU/s",
    )
    res.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
