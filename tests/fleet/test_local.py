"""Local provider: real `igniter-agent run --no-gpu` processes as instances."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.fleet.base import PermanentError
from autoscaler.fleet.local import PORT_STRIDE, LocalProvider
from tests.kit.fleet import free_base

pytestmark = pytest.mark.e2e


def wait(pred, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.fixture()
def provider(tmp_path: Path) -> Iterator[LocalProvider]:
    prov = LocalProvider("lp", tmp_path / "instances", free_base(4 * PORT_STRIDE))
    yield prov
    for inst in prov.list_instances():
        prov.terminate(inst.id)


def test_launch_list_terminate(provider: LocalProvider, tmp_path: Path) -> None:
    a = provider.launch("lp-p3-0", "p3.2xlarge", 1)
    assert provider.launch("lp-p3-0", "p3.2xlarge", 1).id == a.id  # idempotent per (slot, attempt)
    b = provider.launch("lp-p3-1", "p3.2xlarge", 1)
    base = provider.base_port
    assert {a.tags["igniter:port_base"], b.tags["igniter:port_base"]} == {str(base), str(base + PORT_STRIDE)}
    wait(lambda: {i.state for i in provider.list_instances()} == {"running"})
    other = LocalProvider("someone-else", tmp_path / "instances", base)
    assert other.list_instances() == []
    with pytest.raises(PermanentError):
        other.terminate(a.id)
    meta_pid = int(json.loads((Path(a.tags["igniter:state_dir"]) / "instance.json").read_text())["pid"])
    provider.terminate(a.id)
    provider.terminate(a.id)  # idempotent
    assert [i.id for i in provider.list_instances()] == [b.id]
    with pytest.raises(ProcessLookupError):
        os.kill(meta_pid, 0)
    c = provider.launch("lp-p3-2", "p3.2xlarge", 1)
    assert c.tags["igniter:port_base"] == str(base)  # freed range reused


def test_a_range_with_a_port_someone_else_holds_is_skipped(tmp_path: Path) -> None:
    """A listener of another process on one port of the first range (the CI failure: a surge
    instance whose server met `Address already in use` on every apply) moves the launch on."""
    base = free_base(3 * PORT_STRIDE)
    prov = LocalProvider("lp", tmp_path / "instances", base)
    with socket.socket() as held:
        held.bind(("127.0.0.1", base + 7))
        held.listen()
        assert prov._free_port_base() == base + PORT_STRIDE
    assert prov._free_port_base() == base


def test_rediscovered_by_a_new_provider_and_dead_agents_vanish(provider: LocalProvider, tmp_path: Path) -> None:
    a = provider.launch("lp-p3-0", "p3.2xlarge", 1)
    wait(lambda: [i.state for i in provider.list_instances()] == ["running"])
    later = LocalProvider("lp", tmp_path / "instances", provider.base_port)  # e.g. after an autoscaler restart
    assert [i.id for i in later.list_instances()] == [a.id]
    os.killpg(int(later._read(Path(a.tags["igniter:state_dir"]))["pid"]), signal.SIGKILL)  # type: ignore[index]
    wait(lambda: provider.list_instances() == [] and later.list_instances() == [])
