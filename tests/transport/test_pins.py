"""Host key pins (transport/pins.py) and the trust step (transport/trust.py), with a stand-in source."""

from __future__ import annotations

import logging
import stat
import threading
from pathlib import Path

import pytest

from autoscaler.fleet.base import Instance, PermanentError
from autoscaler.transport.pins import MARKER, PinnedHostKeys
from autoscaler.transport.trust import READ_CONCURRENCY, HostKeyTrust
from tests.fleet.test_console import keygen

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("pin-keys")
    return {
        "a": keygen(d, "ed25519"),
        "b": keygen(d, "ecdsa", "-b", "256"),
        "c": keygen(d, "rsa", "-b", "2048"),
        "d": keygen(d, "ed25519", name="other"),
    }


def node(instance_id: str, address: str | None = "10.0.0.5", state: str = "running") -> Instance:
    return Instance(
        id=instance_id, instance_type="p3.2xlarge", slot="f-p3-0", state=state, launched_at=0.0, address=address
    )  # type: ignore[arg-type]


def lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def test_pins_are_per_instance_and_preferred_type_first(tmp_path: Path, keys: dict[str, str]) -> None:
    pins = PinnedHostKeys(tmp_path / "ssh" / "known_hosts")
    assert pins.keys_for("i-1") == [] and pins.pinned_ids() == set()
    assert pins.pin("i-1", "10.0.0.5", 22, [keys["c"], keys["b"], keys["a"]]) == 3
    assert [k.get_name() for k in pins.keys_for("i-1")] == ["ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"]
    assert pins.keys_for("i-2") == []
    assert lines(pins.path)[0].startswith("10.0.0.5 ") and all(
        line.endswith(f" {MARKER}i-1") for line in lines(pins.path)
    )
    assert stat.S_IMODE(pins.path.stat().st_mode) == 0o600
    pins.pin("i-2", "10.0.0.6", 2222, [keys["d"]])
    assert any(line.startswith("[10.0.0.6]:2222 ssh-ed25519 ") for line in lines(pins.path))  # OpenSSH's format


def test_an_address_reused_by_a_new_instance_gets_only_the_new_console_keys(
    tmp_path: Path, keys: dict[str, str]
) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(f"10.0.0.5 {keys['c']}\n192.168.1.1 {keys['b']}\n")  # written by hand
    pins = PinnedHostKeys(path)
    pins.pin("i-old", "10.0.0.5", 22, [keys["a"]])
    assert pins.keys_for("i-old")[0].get_base64() == keys["a"].split()[1]
    pins.pin("i-new", "10.0.0.5", 22, [keys["d"]])
    assert pins.keys_for("i-old") == [] and pins.pinned_ids() == {"i-new"}
    assert [line.split()[0] for line in lines(path)].count("10.0.0.5") == 1
    assert f"192.168.1.1 {keys['b']}" in lines(path)  # other hand-written lines stay


def test_unmarked_lines_are_never_trusted_for_an_instance(tmp_path: Path, keys: dict[str, str]) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(f"10.0.0.5 {keys['a']}\n10.0.0.5 {keys['a']} igniter:instance=\n")
    assert PinnedHostKeys(path).keys_for("i-1") == [] and PinnedHostKeys(path).keys_for("") == []


def test_retain_removes_the_pins_of_gone_instances(tmp_path: Path, keys: dict[str, str]) -> None:
    pins = PinnedHostKeys(tmp_path / "known_hosts")
    pins.pin("i-1", "10.0.0.5", 22, [keys["a"]])
    pins.pin("i-2", "10.0.0.6", 22, [keys["b"]])
    assert pins.retain({"i-2", "i-3"}) == ["i-1"]
    assert pins.pinned_ids() == {"i-2"} and "i-1" not in pins.path.read_text()
    assert pins.retain({"i-2"}) == []


def test_keys_that_cannot_be_loaded_are_ignored_with_a_log_line(
    tmp_path: Path, keys: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    kind, blob = keys["a"].split()
    short = f"{kind} {blob[:-8]}"  # valid base64 of a too-short ed25519 key: paramiko refuses it
    pins = PinnedHostKeys(tmp_path / "known_hosts")
    with caplog.at_level(logging.WARNING, "autoscaler.transport.pins"):
        assert pins.pin("i-1", "10.0.0.5", 22, [short, "ssh-unknown AAAAB3Nz", keys["b"]]) == 1
        assert pins.pin("i-2", "10.0.0.6", 22, [short]) == 0
    assert sum("cannot be loaded" in r.message for r in caplog.records) == 3
    assert pins.pinned_ids() == {"i-1"}


class Source:
    """A stand-in HostKeySource: what each instance has published so far."""

    def __init__(self) -> None:
        self.published: dict[str, list[str] | None] = {}
        self.asked: list[str] = []
        self.error: Exception | None = None

    def host_keys(self, instance: Instance) -> list[str] | None:
        self.asked.append(instance.id)
        if self.error is not None:
            raise self.error
        return self.published.get(instance.id)


def test_trust_waits_for_the_console_then_pins_and_forgets(
    tmp_path: Path, keys: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    source, pins = Source(), PinnedHostKeys(tmp_path / "known_hosts")
    trust = HostKeyTrust(source, pins, 22)
    a, booting = node("i-a"), node("i-b", "10.0.0.9", "pending")
    with caplog.at_level(logging.DEBUG, "autoscaler"):
        trust.refresh([a, booting])
    assert not trust.reachable(a) and source.asked == ["i-a"]  # a pending instance is not asked
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    source.published["i-a"] = [keys["a"]]
    trust.refresh([a, booting])
    assert trust.reachable(a) and pins.pinned_ids() == {"i-a"}
    trust.refresh([a])
    assert source.asked == ["i-a", "i-a"]  # pinned: never asked again
    reused = node("i-c")  # i-a's address, i-a gone
    trust.refresh([reused])
    assert not trust.reachable(reused) and pins.pinned_ids() == set()  # the old pin is not inherited
    source.published["i-c"] = [keys["d"]]
    trust.refresh([reused])
    assert trust.reachable(reused) and pins.keys_for("i-c")[0].get_base64() == keys["d"].split()[1]


def test_console_errors_and_unusable_keys_are_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source, pins = Source(), PinnedHostKeys(tmp_path / "known_hosts")
    trust = HostKeyTrust(source, pins, 22)
    source.error = PermanentError("UnauthorizedOperation: not allowed to GetConsoleOutput")
    with caplog.at_level(logging.WARNING, "autoscaler"):
        for _ in range(3):
            trust.refresh([node("i-a")])
        source.error = None
        source.published["i-a"] = []  # a block with no usable key
        for _ in range(3):
            trust.refresh([node("i-a")])
    messages = [r.message for r in caplog.records]
    assert sum("GetConsoleOutput" in m for m in messages) == 1
    assert sum("no usable SSH host key" in m for m in messages) == 1
    assert source.asked == ["i-a"] * 4 and not trust.reachable(node("i-a"))


def test_consoles_are_read_at_once_and_pinned_in_the_listings_order(tmp_path: Path, keys: dict[str, str]) -> None:
    """After a scale-out every booting instance's console is read each tick: READ_CONCURRENCY at a
    time, not one after another (each source call here waits until that many are in flight; one
    at a time, the barrier breaks), and the keys are pinned in the listing's order."""
    ready = threading.Barrier(READ_CONCURRENCY, timeout=5)

    class Together(Source):
        def host_keys(self, instance: Instance) -> list[str] | None:
            ready.wait()
            return super().host_keys(instance)

    source, pins = Together(), PinnedHostKeys(tmp_path / "known_hosts")
    nodes = [node(f"i-{n:02d}", f"10.0.1.{n}") for n in range(2 * READ_CONCURRENCY)]
    source.published = {n.id: [keys["a"]] for n in nodes[::2]}  # half have printed theirs
    HostKeyTrust(source, pins, 22).refresh(nodes)
    assert sorted(source.asked) == [n.id for n in nodes]
    assert pins.pinned_ids() == {n.id for n in nodes[::2]}
