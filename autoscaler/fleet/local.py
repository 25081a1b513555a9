"""Local provider, the embedded default: an "instance" is an `igniter-agent run --no-gpu` process.

Each instance gets its own state directory under `state_root` (holding instance.json, the agent's
state and its log) and its own range of server ports, 100 ports apart. Both are typed fields of
the Instance (`state_dir`, `port_base`; also shown as `igniter:*` tags for an operator). A range
is taken only when its ports can be bound at launch: a port held by any other process (a server of
another fleet, an outgoing connection's ephemeral port) would fail that instance's servers on every
apply until it is retired.
Instances outlive the autoscaler, as VMs do; a later run rediscovers them from their directories.
An instance is `running` while its agent holds the state directory's lock, `pending` while the
process lives but has not taken it yet; a dead agent is not listed (the controller sees it vanish).

A launch writes instance.json (the intent, without a pid) before it starts the agent, then again
with the pid: an autoscaler killed between the two leaves an instance whose agent is found by
its command line (`--state-dir <its directory>`, a marker no other process carries) and adopted,
so it is listed, relaunched as itself, and stopped by `terminate` and `igniter down`, never left
as an orphan that holds the directory's lock.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.launch import agent_env, resolve_agent_command
from agents.node.mig_geometry import GEOMETRIES
from agents.node.status import agent_running
from autoscaler.config.offerings import ON_DEMAND
from autoscaler.config.policy import Policy
from autoscaler.fleet.base import TAG_FLEET, Instance, InstanceState, PermanentError, fleet_tags
from autoscaler.fleet.procs import find_owned, owned, private_dirs
from autoscaler.model.mig import load_gpu_model, mig_starts

PORT_STRIDE = 100
META = "instance.json"


class LocalProvider:
    def __init__(
        self,
        fleet: str,
        state_root: Path,
        base_port: int,
        agent_command: str = "igniter-agent",
        clock: Callable[[], float] = time.time,
        stop_timeout_s: float = 15.0,
        agent_flags: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.fleet = fleet
        # Extra `igniter-agent run` flags per instance type: `--fake-mig GPU --fake-gpus N` for a
        # MIG GPU type, whose assignments name slices that only a (fake) MIG device can cut here.
        self.agent_flags = dict(agent_flags or {})
        self.root = state_root.resolve()
        self.base_port = base_port
        self.argv = resolve_agent_command(agent_command)
        self.clock = clock
        self.stop_timeout_s = stop_timeout_s
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def list_instances(self) -> list[Instance]:
        out = []
        for meta in self._metas():
            state = self._state(meta)
            if state is not None:
                out.append(self._instance(meta, state))
        return sorted(out, key=lambda i: i.id)

    def launch(
        self,
        slot: str,
        instance_type: str,
        plan_generation: int,
        *,
        attempt: int = 0,
        salt: str = "",
        capacity_type: str = ON_DEMAND,
    ) -> Instance:
        """Start an agent process for the slot's attempt (local processes have no spot market:
        `capacity_type` is only recorded, so a policy with spot prices runs here unchanged)."""
        iid = f"local-{slot}-a{attempt}"
        existing = self._read(self.root / iid)
        if existing and not existing.get("terminated") and self._state(existing) is not None:
            return self._instance(existing, self._state(existing) or "pending")
        meta = {
            "id": iid,
            "fleet": self.fleet,
            "slot": slot,
            "instance_type": instance_type,
            "attempt": attempt,
            "generation": plan_generation,
            "capacity_type": capacity_type,
            "launched_at": self.clock(),
            "port_base": self._free_port_base(),
            "terminated": False,
        }
        self._prepare(self.root / iid)
        self._write(self.root / iid, meta)  # the intent first: a crash after the spawn leaves a trace
        meta["pid"] = self._spawn(self.root / iid, tuple(self.agent_flags.get(instance_type, ())))
        self._write(self.root / iid, meta)
        return self._instance(meta, "pending")

    def terminate(self, instance_id: str) -> None:
        meta = self._read(self.root / instance_id)
        if meta is None or meta.get("terminated"):
            return
        if meta.get("fleet") != self.fleet:
            raise PermanentError(f"refusing to terminate {instance_id}: it does not carry {TAG_FLEET}={self.fleet}")
        self._stop(self._pid(meta), self.root / instance_id)
        meta["terminated"] = True
        self._write(self.root / instance_id, meta)

    def close(self) -> None:
        """Reap exited children; running agents are instances and keep running."""
        for pid, proc in list(self._children.items()):
            if proc.poll() is not None:
                self._children.pop(pid, None)

    # -- helpers ----------------------------------------------------------------------------------
    def _prepare(self, state_dir: Path) -> None:
        private_dirs(self.root)  # the instances' state: private, and every directory made for it
        state_dir.mkdir(exist_ok=True, mode=0o700)

    def _spawn(self, state_dir: Path, flags: tuple[str, ...] = ()) -> int:
        with open(os.open(state_dir / "agent.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab") as log:
            proc = subprocess.Popen(
                [*self.argv, "run", "--state-dir", str(state_dir), "--no-gpu", *flags],  # _marker names this
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                env=agent_env(),  # an allow-list: the autoscaler's AWS keys and tokens stay here
            )
        self._children[proc.pid] = proc
        return proc.pid

    def _stop(self, pid: int, state_dir: Path) -> None:
        """SIGTERM the agent's process group (its servers stop with it), SIGKILL after a timeout."""
        if pid <= 0 or not self._alive(pid, state_dir):
            return
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        while self._alive(pid, state_dir) and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._alive(pid, state_dir):
            _signal_group(pid, signal.SIGKILL)
            time.sleep(0.1)
        self._alive(pid, state_dir)

    def _alive(self, pid: int, state_dir: Path) -> bool:
        """Our child still running, or (from an earlier run) a live process whose command line names
        this state directory: a recycled pid is never mistaken for, or signalled as, an agent."""
        proc = self._children.get(pid)
        if proc is not None:
            if proc.poll() is None:
                return True
            self._children.pop(pid, None)
            return False
        return owned(pid, str(state_dir))

    def _state(self, meta: dict[str, Any]) -> InstanceState | None:
        if meta.get("terminated") or meta.get("fleet") != self.fleet:
            return None
        state_dir = self.root / str(meta["id"])
        if agent_running(state_dir):
            return "running"
        return "pending" if self._alive(self._pid(meta), state_dir) else None

    def _pid(self, meta: dict[str, Any]) -> int:
        """The agent's pid: as written, or (a launch cut off before it wrote it) found by its
        command line, then written down."""
        pid = int(meta.get("pid") or 0)
        if pid or meta.get("terminated"):
            return pid
        state_dir = self.root / str(meta["id"])
        found = find_owned(_marker(state_dir))
        if found is None:
            return 0
        meta["pid"] = found
        self._write(state_dir, meta)
        return found

    def _instance(self, meta: dict[str, Any], state: InstanceState) -> Instance:
        capacity = str(meta.get("capacity_type", ON_DEMAND))
        tags = fleet_tags(self.fleet, meta["slot"], int(meta["generation"]), int(meta["attempt"]), capacity)
        tags.update({"igniter:state_dir": str(self.root / meta["id"]), "igniter:port_base": str(meta["port_base"])})
        return Instance(
            id=meta["id"],
            instance_type=meta["instance_type"],
            slot=meta["slot"],
            state=state,
            launched_at=float(meta["launched_at"]),
            address="127.0.0.1",
            plan_generation=int(meta["generation"]),
            attempt=int(meta["attempt"]),
            port_base=int(meta["port_base"]),
            state_dir=str(self.root / meta["id"]),
            tags=tags,
            capacity_type=capacity,
        )

    def _metas(self) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        return [m for d in sorted(self.root.iterdir()) if (m := self._read(d)) is not None]

    def _free_port_base(self) -> int:
        """The first range not held by a live instance of this provider whose ports are free now."""
        used = {int(m["port_base"]) for m in self._metas() if not m.get("terminated")}
        for base in range(self.base_port, 65536 - PORT_STRIDE, PORT_STRIDE):
            if base not in used and all(port_is_free(base + i) for i in range(PORT_STRIDE)):
                return base
        raise PermanentError(f"no free range of {PORT_STRIDE} ports on 127.0.0.1 from {self.base_port}")

    @staticmethod
    def _read(state_dir: Path) -> dict[str, Any] | None:
        try:
            data = json.loads((state_dir / META).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and "id" in data else None

    @staticmethod
    def _write(state_dir: Path, meta: dict[str, Any]) -> None:
        tmp = state_dir / (META + ".tmp")
        tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
        os.replace(tmp, state_dir / META)


def port_is_free(port: int) -> bool:
    """Whether a server could bind 127.0.0.1:port right now, with the SO_REUSEADDR it sets
    (agents/server/guard.py): a port a closed server left in TIME_WAIT counts as free."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def fake_mig_flags(policy: Policy) -> dict[str, tuple[str, ...]]:
    """Per instance type whose GPU has a MIG profile (measured slices) and a fake MIG device: the
    local agent cuts fake slices (`--fake-mig GPU --fake-gpus N`), so a MIG plan runs on CPUs."""
    return {
        t.name: ("--fake-mig", t.gpu, "--fake-gpus", str(t.gpus))
        for t in policy.instance_types
        if t.gpu in GEOMETRIES
        and (policy.profiles_dir / f"{t.gpu}.yaml").is_file()
        and mig_starts(load_gpu_model(policy.profiles_dir / f"{t.gpu}.yaml"))
    }


def _marker(state_dir: Path) -> str:
    """What only this instance's agent has on its command line."""
    return f"run --state-dir {state_dir} --no-gpu"


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
