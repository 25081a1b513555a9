"""The architecture, as rules on the import graph (one test for the whole tree).

- Pure packages (config, model, planner, core) and the contract modules of the edges
  (fleet/base.py, transport/base.py) import no cloud SDK, SSH, process, socket or clock module:
  inputs in, values out, time passed in.
- The simulator reads no clock either: it runs on simulated time.
- Each package imports only the packages below it (LAYERS): data flows down the layout of
  docs/architecture.md, never up, so the pure core cannot reach the loop and the loop cannot reach the CLI.
- The agents (agents/) import nothing from the autoscaler: a GPU VM installs only the agent.
- core/ and loop/ are in rooms (ROOMS), each a subpackage whose docstring says what it owns; a room
  imports only the rooms below it, so the rollout can use the layout but never the other way round,
  and the tick can use the store but the store never the tick.
- No module of the autoscaler imports itself back through others: the import graph has no cycle
  (type-checking and late imports count, since a cycle they hide comes back the day one is moved).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.unit


FORBIDDEN = {"boto3", "botocore", "paramiko", "subprocess", "time", "datetime", "socket", "httpx", "requests"}
PURE_DIRS = ["autoscaler/config", "autoscaler/model", "autoscaler/planner", "autoscaler/core"]
CONTRACTS = ["autoscaler/fleet/base.py", "autoscaler/transport/base.py", "autoscaler/leader/base.py"]
NO_CLOCK_DIRS = ["autoscaler/sim"]

PURE = {"config", "model", "planner", "core", "fleet.base", "transport.base", "leader.base"}
# modules that count as a layer of their own: a package's contract, and fleet's process helpers,
# which the local gateway's haproxy shares with the local provider's agents
SINGLE = {"fleet.base", "transport.base", "leader.base", "fleet.procs"}
EDGES = {"fleet", "transport", "rates", "gateway", "leader"}
# package -> the autoscaler packages it may import ("fleet.base": that module only; "fleet": all of fleet/)
LAYERS: dict[str, set[str]] = {
    "config": set(),
    "model": {"config"},
    "planner": {"config", "model"},
    "core": {"config", "model", "planner", "fleet.base", "transport.base"},
    "fleet": {"config", "model", "fleet", "transport.base"},
    "transport": {"config", "core", "fleet.base", "transport"},
    "rates": {"config", "core", "fleet.base", "transport.base", "rates"},
    "gateway": {"config", "core", "fleet.base", "fleet.procs", "transport.base", "leader.base", "gateway"},
    "leader": {"config", "leader"},
    "loop": PURE | EDGES | {"loop"},
    "sim": PURE | EDGES | {"loop", "sim"},
    "demo": PURE | EDGES | {"loop", "sim", "demo"},
    "cli": PURE | EDGES | {"loop", "sim", "demo", "cli"},
}
# What the autoscaler may import from the agent side: its wire contract everywhere; the node
# agent itself only where the autoscaler runs agents on this machine (local provider, demo), with
# the sample models they serve there (and `igniter models init`); the
# inference server's torch-free HTTP guard where the loop serves its status endpoint; the status
# file's name, keys and lock where the transports read it (transport/status_file.py).
AGENT_IMPORTS: dict[str, set[str]] = {
    "loop": {"agents.server.guard"},
    "fleet": {"agents.node", "agents.launch", "agents.samples"},
    "transport": {"agents.launch", "agents.node.status"},
    "demo": {"agents.node", "agents.launch", "agents.samples"},
    "cli": {"agents.samples"},
}
# the wire contracts and the one log format: owned by the agent side, shared by both
AGENT_CONTRACT = {"agents.spec", "agents.profiler.schema", "agents.logs"}
# core's rooms -> the rooms each may import (besides itself): the layout at the bottom, the rollout on top
CORE_ROOMS: dict[str, set[str]] = {
    "layout": set(),
    "capacity": set(),
    "fleet": {"layout"},
    "rollout": {"layout", "fleet"},
    "routing": {"layout"},
}
# loop's rooms, the same way: state at the bottom, the service on top
LOOP_ROOMS: dict[str, set[str]] = {
    "state": set(),
    "steps": {"state"},
    "tick": {"state", "steps"},
    "status": {"state", "steps", "tick"},
    "service": {"state", "steps", "tick", "status"},
}
ROOMS: dict[str, dict[str, set[str]]] = {"core": CORE_ROOMS, "loop": LOOP_ROOMS}


def py_files(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py"))


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once per run (every rule here walks the same files)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports(path: Path) -> Iterator[str]:
    """Absolute module names imported anywhere in the file (late imports included)."""
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def package_of(path: Path) -> str:
    """`autoscaler/core/layout/layout.py` -> "core"; the top-level entry modules -> "cli"."""
    parts = path.relative_to(ROOT / "autoscaler").parts
    return parts[0] if len(parts) > 1 else "cli"


def target(module: str) -> str | None:
    """`autoscaler.fleet.base.Instance` -> "fleet.base"; `autoscaler.core.layout.layout` -> "core"."""
    parts = module.split(".")
    if parts[0] != "autoscaler" or len(parts) < 2:
        return None
    if len(parts) > 2 and f"{parts[1]}.{parts[2]}" in SINGLE:
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


@pytest.mark.parametrize("path", py_files(*PURE_DIRS) + [ROOT / c for c in CONTRACTS], ids=rel)
def test_pure_modules_import_no_side_effects(path: Path) -> None:
    roots = {m.split(".")[0] for m in imports(path)}
    assert not roots & FORBIDDEN, f"{rel(path)} imports {sorted(roots & FORBIDDEN)}"


@pytest.mark.parametrize("path", py_files(*NO_CLOCK_DIRS), ids=rel)
def test_simulator_reads_no_clock(path: Path) -> None:
    roots = {m.split(".")[0] for m in imports(path)}
    assert not roots & FORBIDDEN, f"{rel(path)} imports {sorted(roots & FORBIDDEN)}"


def _allowed(pkg: str, tgt: str) -> bool:
    allowed = LAYERS[pkg]
    return tgt in allowed or (tgt in SINGLE and tgt.split(".")[0] in allowed)


@pytest.mark.parametrize("path", py_files("autoscaler"), ids=rel)
def test_imports_follow_the_layers(path: Path) -> None:
    pkg = package_of(path)
    assert pkg in LAYERS, f"{rel(path)}: package {pkg!r} has no place in LAYERS"
    bad = sorted({t for m in imports(path) if (t := target(m)) and t != pkg and not _allowed(pkg, t)})
    assert not bad, f"{rel(path)} ({pkg}) imports {bad}, above its layer"
    agent = sorted(
        {
            m
            for m in imports(path)
            if m.split(".")[0] == "agents"
            and not any(m == a or m.startswith(a + ".") for a in AGENT_CONTRACT | AGENT_IMPORTS.get(pkg, set()))
        }
    )
    assert not agent, f"{rel(path)} imports the agent's internals {agent}"


@pytest.mark.parametrize("path", py_files("agents"), ids=rel)
def test_agents_import_nothing_from_the_autoscaler(path: Path) -> None:
    bad = sorted({m for m in imports(path) if m.split(".")[0] == "autoscaler"})
    assert not bad, f"{rel(path)} imports {bad}"


def test_every_package_is_covered() -> None:
    """A new folder must be placed in LAYERS (and, if pure, in PURE_DIRS) before it can land."""
    found = {p.name for p in (ROOT / "autoscaler").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert found <= set(LAYERS), sorted(found - set(LAYERS))


@pytest.mark.parametrize("pkg", sorted(ROOMS))
def test_rooms_say_what_they_own(pkg: str) -> None:
    """core/ and loop/ hold rooms only (no loose module), each a package whose docstring names what it owns."""
    base = ROOT / "autoscaler" / pkg
    loose = sorted(p.name for p in base.glob("*.py") if p.name != "__init__.py")
    assert not loose, f"{pkg}/ modules outside a room: {loose}; move each into the room it belongs to"
    rooms = {p.name for p in base.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert rooms == set(ROOMS[pkg]), f"{pkg}/ rooms {sorted(rooms)} != {sorted(ROOMS[pkg])}"
    for room in sorted(rooms):
        init = base / room / "__init__.py"
        assert init.exists(), f"{pkg}/{room}/ has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc.split()) >= 8, f"{pkg}/{room}/__init__.py: no docstring saying what the room owns"


@pytest.mark.parametrize("path", py_files("autoscaler/core", "autoscaler/loop"), ids=rel)
def test_rooms_import_only_the_rooms_below(path: Path) -> None:
    pkg = path.relative_to(ROOT / "autoscaler").parts[0]
    room = path.relative_to(ROOT / "autoscaler" / pkg).parts[0]
    if room == "__init__.py":
        return
    prefix = f"autoscaler.{pkg}."
    used = {m.split(".")[2] for m in imports(path) if m.startswith(prefix) and len(m.split(".")) > 2}
    bad = sorted(used - ROOMS[pkg][room] - {room})
    assert not bad, f"{rel(path)} ({pkg}/{room}) imports {pkg} rooms {bad}; it may import {sorted(ROOMS[pkg][room])}"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(name: str, files: dict[str, Path]) -> str | None:
    """The module of the tree an imported name lives in (`pkg.mod.Name` -> "pkg.mod"), or None."""
    while name and name not in files:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(path: Path, files: dict[str, Path]) -> set[str]:
    """The modules of the tree a file imports. `from pkg import mod` names the submodule only (its
    package is already importing: no edge back to it); `from mod import name` names mod."""
    out: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names]
            names = subs if all(m in files for m in subs) else [node.module, *(m for m in subs if m in files)]
        else:
            continue
        out |= {m for n in names if (m := resolve(n, files))}
    return out


def import_graph(*dirs: str) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports."""
    files = {module_name(p): p for p in py_files(*dirs)}
    return {mod: module_imports(path, files) - {mod} for mod, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (its modules in order, the first repeated at the end), or [] when none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_find_cycle_sees_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_import_cycles() -> None:
    graph = import_graph("autoscaler", "agents")
    assert "autoscaler.core.layout.layout" in graph  # the walk found the tree
    cycle = find_cycle(graph)
    assert not cycle, "import cycle: " + " -> ".join(cycle)
