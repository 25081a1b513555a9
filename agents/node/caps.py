"""What one assignment may ask of this node: caps derived from the node itself, checked at `apply`.

Without them an assignment of 1,000 servers x 64 processes was handed over (about 300 GB at the
320 MB one CPU server was measured to take). The rule (docs/agent.md, Caps from the node):

- processes in all (the sum of every server's `processes`) <= this node's memory / 320 MB
  (memory: the machine's RAM, or its cgroup's memory.max where that is lower), and at least 1;
- where the node's GPUs are known (NVML, or the fake MIG device of `run --fake-mig`): each
  `gpu_index` names one of them, and the processes sharing one MPS server (a whole GPU's, or a
  MIG slice's) are at most 48, the clients one Volta-or-later MPS server takes. On a node whose
  GPUs are not known (a CPU node, `--no-gpu`) `gpu_index` is a label and only the memory cap holds.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agents.errors import InputError
from agents.node.mig_device import MigGpu
from agents.spec import Assignment

PROCESS_BYTES = 320 * 10**6  # one CPU server (torch and a TorchScript model loaded), measured
MPS_CLIENTS = 48  # client processes one MPS server takes (NVIDIA's MPS docs, Volta and later)
CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")
Domain = tuple[int, str, int]  # (GPU, slice profile, start); ("", -1) for the whole GPU


@dataclass(frozen=True)
class NodeCaps:
    """This node's facts the caps come from; gpus None: not known (no NVML, no fake MIG)."""

    memory_bytes: int
    gpus: int | None

    @property
    def max_processes(self) -> int:
        return max(1, self.memory_bytes // PROCESS_BYTES)


def memory_bytes(cgroup_max: Path = CGROUP_MEMORY_MAX) -> int:
    """The memory this node's processes may use: RAM, or the cgroup's limit where that is lower."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        limit = cgroup_max.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return total
    return min(total, int(limit)) if limit.isdigit() else total  # "max": no limit


def node_caps(gpus: Mapping[int, MigGpu]) -> NodeCaps:
    """The caps from this machine's memory and `gpus` (agents/node/mig_check.inventory)."""
    return NodeCaps(memory_bytes=memory_bytes(), gpus=len(gpus) or None)


def check_caps(assignment: Assignment, source: str, caps: NodeCaps) -> None:
    """Raise InputError naming the first server field past a cap (docs/agent.md, Caps from the node)."""
    total = 0
    per_mps: dict[Domain, int] = {}
    for i, server in enumerate(assignment.servers):
        if caps.gpus is not None and server.gpu_index >= caps.gpus:
            raise InputError(
                source, f"servers[{i}].gpu_index", f"GPU {server.gpu_index} is not on this node ({caps.gpus} GPUs)"
            )
        total += server.processes
        if total > caps.max_processes:
            raise InputError(
                source,
                f"servers[{i}].processes",
                f"{total:,} processes by this server, more than the {caps.max_processes:,} this node's "
                f"{caps.memory_bytes / 2**30:.1f} GiB of memory can hold at 320 MB a process (docs/agent.md, Caps)",
            )
        if caps.gpus is not None:
            _check_mps(source, i, server.processes, server.mig_slice(), server.gpu_index, per_mps)


def _check_mps(source: str, i: int, processes: int, key: Domain | None, gpu: int, per_mps: dict[Domain, int]) -> None:
    """At most MPS_CLIENTS processes on one MPS server: a whole GPU's, or one MIG slice's."""
    domain = key if key is not None else (gpu, "", -1)
    per_mps[domain] = per_mps.get(domain, 0) + processes
    if per_mps[domain] > MPS_CLIENTS:
        where = f"slice {key[1]}@{key[2]} on GPU {gpu}" if key is not None else f"GPU {gpu}"
        raise InputError(
            source,
            f"servers[{i}].processes",
            f"{per_mps[domain]} processes on {where}, more than the {MPS_CLIENTS} clients one MPS server takes",
        )
