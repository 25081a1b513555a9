"""Triton's repository-index entries and the index request's body, without a server."""

from __future__ import annotations

import pytest

from agents.server.triton import index_entry, wants_ready_only

pytestmark = pytest.mark.unit


def test_states_follow_the_servers_life() -> None:
    assert index_entry("m", ready=True, draining=False) == {"name": "m", "version": "1", "state": "READY"}
    assert index_entry("m", ready=False, draining=False)["state"] == "LOADING"
    draining = index_entry("m", ready=False, draining=True)
    assert draining["state"] == "UNLOADING" and draining["reason"]


@pytest.mark.parametrize(
    ("body", "ready_only"), [(b"", False), (b"  ", False), (b"{}", False), (b'{"ready": true}', True)]
)
def test_ready_filter(body: bytes, ready_only: bool) -> None:
    assert wants_ready_only(body) is ready_only


@pytest.mark.parametrize("body", [b"[]", b'{"ready": "yes"}', b"{"])
def test_a_bad_body_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError):
        wants_ready_only(body)
