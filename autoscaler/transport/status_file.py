"""An agent's status, read from the status.json its daemon keeps current: no process per call.

`igniter-agent status --json` starts a Python process on the node for every call (0.1 to 0.3 s
of CPU); a tick reads every agent. The daemon already writes the same document every loop, by
temp file + rename (never read half-written), with `heartbeat_at` refreshed at least every 2 s
while it lives (agents/node/daemon.py). So the transports read that file:

- local: in this process, plus the lock file's word on whether the agent lives (as the CLI does);
- ssh: `date +%s` and `cat` (no Python on the node), whose clock judges the age, so the
  controller's clock need not agree with the node's. They run in a shell loop on a session kept
  open on the pooled connection (reader_command): each read is one newline sent and one frame
  back, a round trip, instead of a session opened, a command started and the session closed
  (about 8 packets each way: 1.2 ms of the controller's CPU a read, 0.3 ms so; the node's 4.9 ms,
  2.1 ms so; benchmarks/agent_call.py).

What the controller sees, by the transport's error table (transport/base.py):

| file                                   | status()                                      |
|----------------------------------------|-----------------------------------------------|
| missing (the agent never wrote it)     | ssh: TransportError NOT_READY (not answered   |
|                                        | yet); local: the CLI's empty document, as     |
|                                        | before (running per the lock, no generation)  |
| heartbeat older than STALE_AFTER_S     | TransportError UNREACHABLE: silent, as a      |
| (agent killed or frozen)               | status that timed out                         |
| not JSON, not an object, not a file    | TransportError UNREACHABLE (a garbled reply)  |
| `agent_running: false` (it shut down)  | the document: an agent that says it stopped   |
| fresh                                  | the document, the shape the CLI prints        |
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path
from typing import Any

from agents.node.status import HEARTBEAT_KEY, STATUS_FILE, agent_running, read_status
from autoscaler.transport.base import TransportError, TransportFault

STALE_AFTER_S = 15.0  # several missed heartbeats (HEARTBEAT_S 2 s): the agent is not answering
NO_FILE_EXIT = 3  # the remote command's exit status when there is no status file yet


FRAME_END = "\x1e"  # ends each answer of reader_command: never in JSON (a control character, escaped there)
NO_FILE = "none"  # reader_command's answer while the agent has written no status file


def reader_command(state_dir: str) -> str:
    """The shell loop a kept-open session runs (POSIX sh): for each line read, the node's clock
    and the file, or NO_FILE, then FRAME_END. It ends when the session's input does (the
    controller closed it, or the connection went)."""
    path = _status_path(state_dir)
    answer = f"if [ -e {path} ]; then date +%s; cat -- {path}; else echo {NO_FILE}; fi"
    return f"while read -r _; do {answer}; printf '\\036'; done"


def parse_frame(frame: str, err: str, where: str, stale_s: float = STALE_AFTER_S) -> dict[str, Any]:
    """The status document from one answer of reader_command (FRAME_END cut off); `err`, what
    the session wrote to stderr meanwhile (cat failed: unreadable, not a file)."""
    if frame == NO_FILE + "\n":
        return parse_remote(NO_FILE_EXIT, "", err, where, stale_s)
    if err:
        raise TransportError(f"{where}: reading the agent status failed: {err.strip()[-500:]}")
    return parse_remote(0, frame, err, where, stale_s)


def _status_path(state_dir: str) -> str:
    return shlex.quote(f"{state_dir.rstrip('/') or '/'}/{STATUS_FILE}")


def parse_remote(rc: int, out: str, err: str, where: str, stale_s: float = STALE_AFTER_S) -> dict[str, Any]:
    """The status document from the node's reply (its clock's line, then the file; `rc`
    NO_FILE_EXIT: no file yet), judged by the node's own clock."""
    if rc == NO_FILE_EXIT:
        raise TransportError(f"{where}: no agent status yet (its agent has not written one)", TransportFault.NOT_READY)
    if rc != 0:
        raise TransportError(f"{where}: reading the agent status exited {rc}: {err.strip()[-500:]}")
    clock, _, body = out.partition("\n")
    try:
        now = float(clock)
        doc = json.loads(body)
    except ValueError as exc:
        raise TransportError(f"{where}: the agent status is not JSON: {exc}") from None
    return judge(doc, now, where, stale_s)


def read_local(state_dir: Path, where: str, now: float, stale_s: float = STALE_AFTER_S) -> dict[str, Any]:
    """The status document of an agent on this machine, with agent_running from its lock, as the
    CLI prints it (no file yet: its empty document, which the controller counts as not answered,
    running or not); a FIFO or other odd file in its place is a garbled reply, never a blocking read."""
    try:
        fd = os.open(state_dir / STATUS_FILE, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return read_status(state_dir)  # the CLI's empty document: not running, or not written yet
    except OSError as exc:
        raise TransportError(f"{where}: cannot read the agent status: {exc}") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TransportError(f"{where}: the agent status is not a regular file")
        raw = handle.read()
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise TransportError(f"{where}: the agent status is not JSON: {exc}") from None
    if isinstance(doc, dict) and not agent_running(state_dir):
        doc["agent_running"] = False
        for server in doc.get("servers", []) if isinstance(doc.get("servers"), list) else []:
            if isinstance(server, dict):  # servers never outlive their agent
                server.update(state="stopped", pid=None)
    return judge(doc, now, where, stale_s)


def judge(doc: Any, now: float, where: str, stale_s: float = STALE_AFTER_S) -> dict[str, Any]:
    """The document, unless it is no object or a running agent's heartbeat is older than
    `stale_s` at `now` (the node's clock): then the agent is silent, as if it timed out."""
    if not isinstance(doc, dict):
        raise TransportError(f"{where}: agent status is not the expected object: {str(doc)[:200]}")
    if doc.get("agent_running") is False:
        return doc
    beat = doc.get(HEARTBEAT_KEY, doc.get("updated_at"))  # an older agent writes updated_at every loop
    if not isinstance(beat, int | float) or isinstance(beat, bool):
        raise TransportError(f"{where}: the agent status carries no heartbeat")
    if now - beat > stale_s:
        raise TransportError(f"{where}: agent silent: its status was last written {now - beat:.0f} s ago")
    return doc
