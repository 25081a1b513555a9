"""`--dist loadgroup` under pytest 9: the tests of one `xdist_group` on one worker.

pytest-xdist (3.8) tells its scheduler a test's group by renaming the test, `item._nodeid =
"<nodeid>@<group>"`; pytest 9 no longer reads `_nodeid` (a node's id is the structured `item._id`),
so the rename was lost, every test was a group of its own, and a module that shares one costly
module-scoped fixture (a fleet, haproxy, checkov's report) had it built again on each worker that
got one of its tests. This hook, run after xdist's on each worker, makes the rename where it did
not take. Where xdist's own rename works (an older pytest, a fixed xdist) it changes nothing.
"""

from __future__ import annotations

import pytest

try:  # pytest >= 9: the structured node id
    from _pytest.nodeid import NodeId
except ImportError:  # pragma: no cover - older pytest: xdist's own rename works
    NodeId = None  # type: ignore[assignment,misc]


def group_of(item: pytest.Item) -> str | None:
    """The group name xdist gives the test: its xdist_group names, sorted and joined by `_`."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names)) if names else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if NodeId is None or not getattr(config.option, "loadgroup", False):  # set on xdist's workers only
        return
    for item in items:
        group = group_of(item)
        if group is not None and not item.nodeid.endswith(f"@{group}"):
            item._id = NodeId.parse(f"{item.nodeid}@{group}")
