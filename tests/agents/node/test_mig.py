"""MIG on the node, in-process: the geometry table, the assignment checks against a GPU, and the
slice manager on the fake device (creation, adoption, foreign slices, NVML errors as status)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.errors import InputError
from agents.node.mig import MigManager
from agents.node.mig_check import check_slices
from agents.node.mig_device import MigError, MigGpu, Slice
from agents.node.mig_fake import FakeMig
from agents.node.mig_geometry import GEOMETRIES, geometry_for, occupied
from agents.node.mps import SliceDirsOnly
from agents.spec import Assignment, SliceKey, parse_assignment

pytestmark = pytest.mark.unit


def test_a100_geometry_is_the_mig_user_guides() -> None:
    a100 = GEOMETRIES["a100-80gb"]
    assert {n: (p.compute, p.size, p.starts) for n, p in a100.profiles.items()} == {
        "1g.10gb": (1, 1, (0, 1, 2, 3, 4, 5, 6)),
        "1g.10gb+me": (1, 1, (0, 1, 2, 3, 4, 5, 6)),
        "1g.20gb": (1, 2, (0, 2, 4, 6)),
        "2g.20gb": (2, 2, (0, 2, 4)),
        "3g.40gb": (3, 4, (0, 4)),
        "4g.40gb": (4, 4, (0,)),
        "7g.80gb": (7, 8, (0,)),
    }
    assert occupied(a100, "3g.40gb", 4) == {4, 5, 6, 7}
    assert geometry_for("NVIDIA A100-SXM4-40GB") is GEOMETRIES["a100-40gb"]
    assert geometry_for("NVIDIA H100 80GB HBM3") is GEOMETRIES["h100-80gb"]
    assert geometry_for("NVIDIA H200") is GEOMETRIES["h200-141gb"]
    assert geometry_for("Tesla V100-SXM2-16GB") is None


@pytest.mark.parametrize("key", sorted(GEOMETRIES))
def test_no_valid_cut_holds_more_than_seven_compute_slices(key: str) -> None:
    """Memory units decide validity: every cut that fits the 8 units has at most 7 compute slices."""
    geometry = GEOMETRIES[key]
    placements = [(p, s) for p in geometry.profiles.values() for s in p.starts]

    def most(i: int, used: frozenset[int]) -> int:
        if i == len(placements):
            return 0
        p, s = placements[i]
        skip = most(i + 1, used)
        units = frozenset(p.units(s))
        return max(skip, p.compute + most(i + 1, used | units)) if not used & units else skip

    assert most(0, frozenset()) == 7


def _doc(*slices: tuple[int, str, int, str]) -> dict[str, Any]:
    return {
        "generation": 1,
        "servers": [
            {"name": f"s{i}", "workload": w, "model_dir": "/m", "batch": 1, "mps_percent": 50, "port": 9000 + i}
            | {"gpu_index": g, "mig_profile": p, "mig_start": s}
            for i, (g, p, s, w) in enumerate(slices)
        ],
    }


A100 = GEOMETRIES["a100-80gb"]
TWO = {0: MigGpu(0, "NVIDIA A100-SXM4-80GB", True, A100), 1: MigGpu(1, "NVIDIA A100-SXM4-80GB", False, A100)}


def _check(doc: dict[str, Any]) -> None:
    check_slices(Assignment.model_validate(doc), "a.json", TWO)


def test_a_valid_cut_with_two_processes_in_one_slice_passes() -> None:
    _check(_doc((0, "3g.40gb", 0, "a"), (0, "3g.40gb", 0, "a"), (0, "2g.20gb", 4, "b"), (0, "1g.10gb", 6, "c")))


@pytest.mark.parametrize(
    ("slices", "field", "words"),
    [
        (((0, "3g.40gb", 0, "a"), (0, "4g.40gb", 0, "b")), "servers[1].mig_start", "overlaps slice 3g.40gb@0"),
        (((0, "3g.40gb", 2, "a"),), "servers[0].mig_start", "may start at 0, 4 on a100-80gb, not 2"),
        (((1, "3g.40gb", 0, "a"),), "servers[0].mig_profile", "GPU 1 (NVIDIA A100-SXM4-80GB) has MIG mode off"),
        (((2, "3g.40gb", 0, "a"),), "servers[0].gpu_index", "this VM has GPUs [0, 1]"),
        (((0, "3g.20gb", 0, "a"),), "servers[0].mig_profile", "has no profile 3g.20gb"),
    ],
)
def test_what_the_gpu_cannot_cut_is_refused_naming_the_field(slices: Any, field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        _check(_doc(*slices))
    assert err.value.field == field and words in err.value.message


def test_one_slice_with_two_workloads_and_half_a_slice_are_refused_without_a_gpu() -> None:
    import json

    with pytest.raises(InputError) as err:
        parse_assignment(json.dumps(_doc((0, "3g.40gb", 0, "a"), (0, "3g.40gb", 0, "b"))), "a.json")
    assert err.value.field == "servers[1].workload" and "already runs workload 'a'" in err.value.message
    half = _doc((0, "3g.40gb", 0, "a"))
    del half["servers"][0]["mig_start"]
    with pytest.raises(InputError) as err:
        parse_assignment(json.dumps(half), "a.json")
    assert err.value.field == "servers[0].mig_start"


# -- the manager on the fake device -----------------------------------------------------------------


def _manager(tmp_path: Path, fake: FakeMig) -> MigManager:
    manager = MigManager(fake, tmp_path / "mig", lambda s: SliceDirsOnly(tmp_path / "mps" / str(s.gi_id), str(s.uuid)))
    manager.adopt()
    return manager


@pytest.fixture
def fake(tmp_path: Path) -> FakeMig:
    return FakeMig.make(tmp_path / "fake.json", "a100-80gb", gpus=2, users=lambda uuid: [])


def _slices(fake: FakeMig, gpu: int = 0) -> set[tuple[str, int]]:
    return {(s.profile, s.start) for s in fake.slices(gpu)}


K3_0, K3_4, K4_0 = SliceKey(0, "3g.40gb", 0), SliceKey(0, "3g.40gb", 4), SliceKey(0, "4g.40gb", 0)


def test_cuts_the_planned_slices_and_re_cuts_once_the_old_one_is_idle(tmp_path: Path, fake: FakeMig) -> None:
    manager = _manager(tmp_path, fake)
    manager.reconcile({K3_0, K3_4}, set())
    assert _slices(fake) == {("3g.40gb", 0), ("3g.40gb", 4)} and manager.ready(K3_0)
    manager.reconcile({K4_0, K3_4}, busy={K3_0})  # 3g@0's servers still drain: 4g@0 waits
    assert _slices(fake) == {("3g.40gb", 0), ("3g.40gb", 4)} and not manager.ready(K4_0)
    waiting = [s for s in manager.describe({})["gpus"][0]["slices"] if s["state"] == "waiting"]
    assert waiting and "3g.40gb@0 to drain" in waiting[0]["waiting_for"]
    manager.reconcile({K4_0, K3_4}, set())
    assert _slices(fake) == {("4g.40gb", 0), ("3g.40gb", 4)} and manager.ready(K4_0) and not manager.errors


def test_a_restarted_manager_adopts_its_slices_and_never_destroys_a_foreign_one(tmp_path: Path, fake: FakeMig) -> None:
    foreign = fake.create(0, "1g.10gb", 6)
    first = _manager(tmp_path, fake)
    first.reconcile({K3_0}, set())
    uuid = first.owned[K3_0].slice.uuid  # type: ignore[union-attr]
    second = _manager(tmp_path, fake)  # a new agent on the same state directory
    assert second.ready(K3_0) and second.owned[K3_0].slice.uuid == uuid  # type: ignore[union-attr]
    second.reconcile(set(), set())  # nothing assigned: ours goes, the foreign one stays
    assert _slices(fake) == {("1g.10gb", 6)}
    gpu0 = second.describe({})["gpus"][0]
    assert gpu0["slices"] == [
        {
            "profile": "1g.10gb",
            "start": 6,
            "uuid": foreign.uuid,
            "gi_id": foreign.gi_id,
            "ci_id": 0,
            "owned": False,
            "state": "foreign",
            "servers": [],
            "mps": None,
        }
    ]
    second.reconcile({SliceKey(0, "2g.20gb", 4), SliceKey(0, "1g.20gb", 6)}, set())  # 1g.20gb@6 needs unit 6
    errors = second.describe({})["errors"]
    assert [(e["op"], e["slice"], e["code"]) for e in errors] == [
        ("create", "1g.20gb@6 on GPU 0", "insufficient_resources")
    ]
    assert "igniter did not create" in errors[0]["message"] and _slices(fake) == {("1g.10gb", 6), ("2g.20gb", 4)}


def test_an_intent_whose_create_landed_before_a_crash_is_adopted(tmp_path: Path, fake: FakeMig) -> None:
    first = _manager(tmp_path, fake)
    first.owned[K3_4] = __import__("agents.node.mig", fromlist=["Owned"]).Owned(K3_4)
    first._save()  # the intent is on disk ...
    made = fake.create(0, "3g.40gb", 4)  # ... the create went through, then kill -9
    second = _manager(tmp_path, fake)
    assert second.ready(K3_4) and second.owned[K3_4].slice == made


@pytest.mark.parametrize("code", ["insufficient_resources", "in_use", "not_supported"])
@pytest.mark.parametrize("op", ["create", "destroy", "list"])
def test_an_nvml_error_is_a_status_entry_then_a_later_success(
    tmp_path: Path, fake: FakeMig, op: str, code: str
) -> None:
    manager = _manager(tmp_path, fake)
    if op == "destroy":
        manager.reconcile({K3_0}, set())
    FakeMig.inject(fake.path, op, code, times=2)
    want: set[SliceKey] = set() if op == "destroy" else {K3_0}
    for attempt in (1, 2):
        manager.reconcile(want, set())
        [entry] = manager.describe({})["errors"]
        assert (entry["code"], entry["attempts"]) == (code, attempt) and "injected fault" in entry["message"]
    manager.reconcile(want, set())
    assert manager.describe({})["errors"] == []
    assert _slices(fake) == ({("3g.40gb", 0)} if want else set())
    assert {(o.key, o.slice is not None) for o in manager.owned.values()} == {(k, True) for k in want}


def test_the_fake_answers_as_nvml_does(tmp_path: Path) -> None:
    users: list[int] = []
    fake = FakeMig.make(tmp_path / "f.json", "h100-80gb", gpus=2, mig_off=(1,), users=lambda uuid: users)
    made = fake.create(0, "3g.40gb", 4)
    assert made.uuid is not None and made.uuid.startswith("MIG-") and made.gi_id == 1
    for args, code in (
        ((0, "4g.40gb", 4), "invalid_argument"),
        ((0, "7g.80gb", 0), "insufficient_resources"),
        ((1, "3g.40gb", 0), "not_supported"),
        ((0, "5g.50gb", 0), "not_supported"),
    ):
        with pytest.raises(MigError) as err:
            fake.create(*args)
        assert err.value.code == code
    users.append(4242)
    with pytest.raises(MigError) as err:
        fake.destroy(0, made.gi_id)
    assert err.value.code == "in_use"
    users.clear()
    fake.destroy(0, made.gi_id)
    assert fake.slices(0) == [] and FakeMig(fake.path).describe() == "fake:h100-80gb"
    assert isinstance(made, Slice)


@pytest.mark.parametrize("key", sorted(GEOMETRIES))
def test_the_agents_geometry_matches_the_planners(key: str) -> None:
    """agents/ imports nothing from autoscaler/, so the two tables are kept equal by this test
    (the planner leaves out the +me profiles, which cut like their 1g profile)."""
    from autoscaler.config.mig import BUNDLED

    planner = {p.name: (p.compute_slices, p.memory_units, p.starts) for p in BUNDLED[key].profiles}
    agent = {n: (p.compute, p.size, p.starts) for n, p in GEOMETRIES[key].profiles.items() if "+me" not in n}
    assert agent == planner


def test_processes_is_1_to_64() -> None:
    import json

    doc = _doc((0, "3g.40gb", 0, "a"))
    assert parse_assignment(json.dumps(doc), "a.json").servers[0].processes == 1
    for bad in (0, 65):
        doc["servers"][0]["processes"] = bad
        with pytest.raises(InputError) as err:
            parse_assignment(json.dumps(doc), "a.json")
        assert err.value.field == "servers[0].processes"
