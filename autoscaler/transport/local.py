"""Local transport: reaches the agents on this machine, for local-provider instances.

Status reads the agent's status.json in this process (transport/status_file.py: no process per
call); apply runs `igniter-agent apply -` (rare, and it validates and writes the assignment as the
agent's own user would). The instance's state directory is its `state_dir` (filled in by the
local provider), else the configured agents.state_dir. Each apply gets the agent's allow-listed
environment (agents/launch.py, `agent_env`), as the local provider's agents do.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from agents.launch import agent_env, resolve_agent_command
from autoscaler.fleet.base import Instance
from autoscaler.transport.base import TransportError, TransportFault
from autoscaler.transport.status_file import read_local


def agent_args(action: str, state_dir: str) -> list[str]:
    """The agent's command line for one action (apply reads the assignment from stdin)."""
    if action == "apply":
        return ["apply", "--state-dir", state_dir, "-"]
    return ["status", "--state-dir", state_dir, "--json"]


def parse_reply(action: str, rc: int, out: str, err: str, where: str) -> Any:
    """Exit 2 is a rejected assignment (do not retry the same one); other failures may be retried."""
    if rc != 0:
        msg = f"{where}: igniter-agent {action} exited {rc}: {err.strip()[-500:] or out.strip()[-500:]}"
        raise TransportError(msg, TransportFault.PERMANENT if rc == 2 else TransportFault.UNREACHABLE)
    if action == "apply":
        return None
    try:
        return json.loads(out)
    except ValueError as exc:
        raise TransportError(f"{where}: igniter-agent status printed no JSON: {exc}") from None


class LocalTransport:
    def __init__(
        self, agent_command: str = "igniter-agent", state_dir: str = "/var/lib/igniter", timeout_s: float = 30.0
    ) -> None:
        self.argv = resolve_agent_command(agent_command)
        self.state_dir = state_dir
        self.timeout_s = timeout_s

    def apply(self, instance: Instance, assignment: dict[str, Any]) -> None:
        self._run(instance, "apply", json.dumps(assignment))

    def status(self, instance: Instance) -> dict[str, Any]:
        """The agent's status.json, read here (the document `igniter-agent status --json` prints)."""
        return read_local(Path(instance.state_dir or self.state_dir), instance.id, time.time())

    def close(self) -> None:
        return None

    def _run(self, instance: Instance, action: str, stdin: str | None) -> Any:
        state_dir = instance.state_dir or self.state_dir
        try:
            proc = subprocess.run(
                [*self.argv, *agent_args(action, state_dir)],
                input=stdin or "",
                text=True,
                capture_output=True,
                env=agent_env(),  # the allow-list: igniter run's AWS keys and tokens stay behind
                timeout=self.timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TransportError(f"{instance.id}: igniter-agent {action} timed out after {self.timeout_s} s") from None
        except OSError as exc:
            raise TransportError(f"{instance.id}: cannot run igniter-agent: {exc}", TransportFault.PERMANENT) from None
        return parse_reply(action, proc.returncode, proc.stdout, proc.stderr, instance.id)
