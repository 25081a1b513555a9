"""Agents read in a bounded pool (issue 50 item 2), end to end: 31 real `igniter-agent run --no-gpu`
processes (the local provider), reached over real SSH (OpenSSH sshd on 127.0.0.1, one pooled
connection each), one of which hangs: the sshd processes serving its connection are stopped
(SIGSTOP), so its call gets no answer at all, as from a node that froze. The status round's wall
time grows by that one call's deadline, not with the count; the hung agent is marked silent
(not answered, not quarantined) and the others answer as before. The act step that follows sends
the hung agent nothing (its re-plan's assignment waits for a tick it answers), so a re-plan tick
costs the one deadline too, not a second one for an apply. The hung agent was silent the tick
before too (as remembered in agent_seen), so it is read in the suspects' lane beside the pool
(transport/bounded.py call_laned): the others keep all max_concurrency slots while it hangs."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autoscaler.config.policy import AgentsConfig
from autoscaler.core.fleet.lifecycle import Reason, new_record, transition
from autoscaler.core.rollout.actions import Configure
from autoscaler.fleet.base import Instance
from autoscaler.fleet.local import LocalProvider
from autoscaler.loop.state.controller_state import ControllerState
from autoscaler.loop.state.store import Store
from autoscaler.loop.steps.actuator import Actuator
from autoscaler.loop.tick.observe import agent_statuses, remember_agents
from autoscaler.loop.tick.records import Deps
from autoscaler.transport.bounded import agent_deadline_s
from autoscaler.transport.ssh import SshTransport
from tests.kit.backends import Sshd
from tests.kit.fleet import free_base

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AGENTS = 31
# Generous for a loaded machine (a handshake or `igniter-agent status` may take seconds there); the
# hung call ends at the command timeout (the channel's read timeout), within its deadline.
DEADLINE = {"connect_timeout_s": 5.0, "command_timeout_s": 8.0}


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[tuple[LocalProvider, list[Instance]]]:
    provider = LocalProvider("pool", tmp_path / "instances", free_base())  # no server is started: no port bound
    try:
        for n in range(AGENTS):
            provider.launch(f"a{n:02d}", "p3.2xlarge", 1)
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            running = [i for i in provider.list_instances() if i.state == "running"]
            if len(running) == AGENTS:
                break
            time.sleep(0.2)
        assert len(running) == AGENTS, f"{len(running)} of {AGENTS} agents took their state directory"
        yield provider, running
    finally:
        with ThreadPoolExecutor(8) as pool:  # each waits for its agent to exit
            list(pool.map(provider.terminate, [i.id for i in provider.list_instances()]))


def _store(instances: list[Instance]) -> Store:
    store = Store(":memory:")
    for inst in instances:
        rec = transition(new_record(inst.slot, 0, "p3.2xlarge", 0.0, 1), Reason.REQUEST, 0.0, "")
        launched = transition(rec.record, Reason.LAUNCHED, 0.0, "", instance_id=inst.id)
        booted = transition(launched.record, Reason.BOOTED, 0.0, "")
        store.apply([rec, launched, booted, transition(booted.record, Reason.AGENT_READY, 0.0, "")])
    return store


def _serving(port: int, client_port: int) -> list[int]:
    """The pids holding the server side of the TCP connection 127.0.0.1:port <- :client_port."""
    want = f"{port:04X}", f"{client_port:04X}"
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if (fields[1].rsplit(":", 1)[1], fields[2].rsplit(":", 1)[1]) == want:
            inodes.add(fields[9])
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        except OSError:
            continue
        if any(f"socket:[{i}]" in links for i in inodes):
            pids.append(int(pid))
    return pids


def _actuator(store, provider, transport, by_id, state, cfg, answered) -> Actuator:  # type: ignore[no-untyped-def]
    return Actuator(
        store=store,
        provider=provider,
        transport=transport,
        instances=by_id,
        assignment_generation={},
        default_port_base=free_base(),
        state=state,
        tick=None,
        clock=time.time,
        host_override="127.0.0.1",
        max_concurrency=cfg.max_concurrency,
        deadline_s=agent_deadline_s(cfg),
        answered=answered,
    )


class Gate:
    """Holds each read that enters until `n` have entered (or `timeout_s` passed). A healthy read
    takes a few ms, so on a loaded machine one may end before the pool has started the next, and
    the overlap the pool allows would show only by chance; held here, the first `n` reads are in
    flight at once exactly when the pool gives them `n` slots together."""

    def __init__(self, n: int, timeout_s: float) -> None:
        self.n, self.timeout_s = n, timeout_s
        self.entered, self.lock, self.full = 0, threading.Lock(), threading.Event()

    def enter(self) -> None:
        with self.lock:
            self.entered += 1
            if self.entered >= self.n:
                self.full.set()
        self.full.wait(self.timeout_s)


class Timed:
    """The real transport, with when each status call began and ended (to see which overlapped);
    with `gate`, each call but `ungated`'s waits at it first."""

    def __init__(self, inner: SshTransport) -> None:
        self.inner, self.spans = inner, {}
        self.gate: Gate | None = None
        self.ungated: str | None = None

    def status(self, instance: Instance) -> dict:
        began = time.monotonic()
        try:
            if self.gate is not None and instance.id != self.ungated:
                self.gate.enter()
            return self.inner.status(instance)
        finally:
            self.spans[instance.id] = (began, time.monotonic())


def test_one_hung_agent_costs_its_deadline_not_the_round(agents, sshd: Sshd) -> None:
    provider, instances = agents
    command = shutil.which("igniter-agent", path=str(Path(os.sys.executable).parent))
    cfg = AgentsConfig(
        transport="ssh",
        user=sshd.user,
        key_file=str(sshd.key_file),
        known_hosts=str(sshd.known_hosts),
        port=sshd.port,
        host_override="127.0.0.1",
        agent_command=str(command),
        max_concurrency=8,
        **DEADLINE,
    )
    transport = SshTransport(cfg)
    timed = Timed(transport)
    store = _store(instances)
    deps = Deps(provider, timed, None, store, None, time.time)  # type: ignore[arg-type]
    by_id = {i.id: i for i in instances}
    try:
        state = ControllerState()
        for _ in range(3):  # opens the connections; on a loaded machine a handshake may time out: asked again
            started = time.monotonic()
            first, state = agent_statuses(deps, state, store.open_records(), by_id, cfg)
            warm = time.monotonic() - started  # the round's time with every agent answering
            if len(first) == AGENTS:
                break
        assert sorted(first) == sorted(i.slot for i in instances)

        hung = instances[7]
        answered = frozenset(first) - {hung.slot}  # silent the tick before as well: a suspect now
        state = remember_agents(state, store.open_records(), answered, time.time())
        client = transport._pool[(hung.id, "127.0.0.1", sshd.port)]
        stopped = _serving(sshd.port, client.get_transport().sock.getsockname()[1])
        assert stopped, "no process serves the hung agent's connection"
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        timed.gate, timed.ungated = Gate(cfg.max_concurrency, 0.2), hung.id
        try:
            started = time.monotonic()
            second, after = agent_statuses(deps, state, store.open_records(), by_id, cfg)
            took = time.monotonic() - started
            act = _actuator(store, provider, transport, by_id, after, cfg, answered=frozenset(second))
            began_act = time.monotonic()
            acted = act.run((Configure(hung.slot, (), "re-plan"),))
            act_took = time.monotonic() - began_act
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
    finally:
        transport.close()
    assert sorted(second) == sorted(i.slot for i in instances if i is not hung)
    assert after.quarantined == {}  # silent, not quarantined: it is asked again next tick
    deadline = agent_deadline_s(cfg)
    began, ended = timed.spans[hung.id]
    print(f"warm round {warm:.2f} s, round with one hung agent {took:.2f} s, its call {ended - began:.2f} s")
    assert ended - began <= deadline + 0.5  # the hung call gave up by its own deadline
    meanwhile = [i.slot for i in instances if i is not hung and began < timed.spans[i.id][1] < ended]
    assert len(meanwhile) >= cfg.max_concurrency - 1  # the others answered while it hung (one at a time: none)
    others = [timed.spans[i.id] for i in instances if i is not hung]
    in_flight = max(sum(b <= start < e for b, e in others) for start, _ in others)
    # The hung call held none of the pool's slots: in the pool it would leave 7 until its grace (0.5 s),
    # and the gate holds them no longer than 0.2 s. More than 8 only if a healthy read outlived the grace.
    assert in_flight >= cfg.max_concurrency
    assert took < (ended - began) + warm  # the round: the hung call's deadline, plus a normal round at most
    assert acted.failed == [] and acted.notes == [
        f"configure {hung.slot} waits: its agent did not answer this tick's status"
    ]
    assert act_took < 1.0  # no apply to the hung agent: no second deadline
