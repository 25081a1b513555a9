"""Sample models (agents/samples.py) and where the local provider keeps them (fleet/samples.py):
their tensors are the profiled models' (the profiles' byte counts), they load and run in torch with
the shapes their model.yaml declares, and `igniter run` with the local provider writes only what is
missing, only into its own default root; `igniter models init` never overwrites a model of yours."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from agents.samples import KNOWN, TINY, Sample, Tensor, sample_for, write
from agents.spec import load_model_config
from autoscaler.cli import main
from autoscaler.config.measured import MeasuredRow
from autoscaler.config.policy import BUNDLED_PROFILES, CLOUD_MODEL_ROOT, load_policy
from autoscaler.config.profile import MeasuredProfile, load_any_profile
from autoscaler.fleet.samples import SAMPLE_MARK, ensure_local_samples, model_root, samples
from tests.kit.control import BASE_POLICY, write_policy

pytestmark = pytest.mark.unit


def test_every_bundled_profiled_model_gets_its_real_tensors() -> None:
    for path in sorted(BUNDLED_PROFILES.glob("*.yaml")):
        profile = load_any_profile(path)
        if isinstance(profile, MeasuredProfile):  # imported MIG tables (docs/planner.md): no tensor sizes
            continue
        for name, m in profile.models.items():
            sample = sample_for(name, int(m.input_bytes_per_request), int(m.output_bytes_per_request))
            assert sample is KNOWN[name], f"{path.name}: {name} sizes differ from its known tensors"
            assert sum(t.nbytes for t in sample.inputs) == m.input_bytes_per_request
            assert sum(t.nbytes for t in sample.outputs) == m.output_bytes_per_request


def test_a_measured_mig_profile_gives_known_tensors_by_name_else_the_tiny_sample() -> None:
    """A measured profile has latencies, no tensor sizes: `models init` and the local fleet's
    samples once stopped on it (an AttributeError, or exit 2 once it sat in the profiles dir)."""
    row = MeasuredRow(slice="1g.10gb", batch=1, processes=1, throughput_rps=50.0, latency_ms=20.0)
    measured = MeasuredProfile(
        kind="measured", gpu="a100-80gb", geometry="a100-80gb", models={"resnet50": (row,), "bert": (row,)}
    )
    got = samples([measured])
    assert got == {"resnet50": KNOWN["resnet50"], "bert": TINY}


def test_a_model_of_unknown_tensors_gets_flat_ones_of_its_sizes() -> None:
    assert sample_for("bert", 4096, 8) == Sample((Tensor("input", (1024,)),), (Tensor("output", (2,)),))
    assert sample_for("resnet50", 4096, 4000).inputs == (Tensor("input", (1024,)),)  # sizes rule


@pytest.mark.parametrize("sample", [KNOWN["ssd"], KNOWN["resnet50"], TINY], ids=["ssd", "resnet50", "tiny"])
def test_a_sample_runs_with_the_shapes_its_model_yaml_declares(tmp_path: Path, sample: Sample) -> None:
    directory = write(tmp_path / "m", sample)
    config = load_model_config(directory)
    assert [(t.name, list(t.shape)) for t in config.inputs] == [(t.name, list(t.shape)) for t in sample.inputs]
    model = torch.jit.load(str(directory / "model.pt"))
    x = [torch.randn(3, *t.shape) for t in sample.inputs]
    out = model(*x)
    outs = out if isinstance(out, tuple) else (out,)
    assert [tuple(o.shape) for o in outs] == [(3, *t.shape) for t in sample.outputs]
    again = torch.jit.load(str(write(tmp_path / "again", sample) / "model.pt"))(*x)  # seeded: the same model
    for a, b in zip(outs, again if isinstance(again, tuple) else (again,)):
        assert torch.equal(a, b)
    one = model(*(t[:1] for t in x))  # a batch of one gives the first row of the batch of three
    torch.testing.assert_close(one if isinstance(one, torch.Tensor) else one[0], outs[0][:1])
    assert math.prod(outs[0].shape[1:]) == math.prod(sample.outputs[0].shape)


def test_the_local_provider_writes_the_missing_samples_beside_the_state(tmp_path: Path) -> None:
    state = tmp_path / "state" / "fleet.sqlite"
    policy = load_policy(write_policy(tmp_path / "p.yaml", provider={"kind": "local"}, agents={"transport": "local"}))
    assert model_root(policy, state) == str(tmp_path / "state" / "models")
    written = ensure_local_samples(policy, state)
    assert sorted(p.name for p in written) == ["alexnet", "resnet50"]
    assert all((p / SAMPLE_MARK).is_file() and (p / "model.pt").is_file() for p in written)
    assert ensure_local_samples(policy, state) == []  # present: nothing to do


def test_nothing_is_written_where_the_operator_says_where_models_are(tmp_path: Path) -> None:
    state = tmp_path / "fleet.sqlite"
    own = load_policy(
        write_policy(tmp_path / "own.yaml", provider={"kind": "local"}, agents={"model_root": str(tmp_path / "mine")})
    )
    assert model_root(own, state) == str(tmp_path / "mine") and ensure_local_samples(own, state) == []
    workloads = [{**w, "model_dir": str(tmp_path / "given" / w["name"])} for w in BASE_POLICY["workloads"]]
    dirs = load_policy(write_policy(tmp_path / "dirs.yaml", workloads=workloads, provider={"kind": "local"}))
    assert ensure_local_samples(dirs, state) == []
    assert not (tmp_path / "models").exists() and not (tmp_path / "mine").exists()
    cloud = load_policy(write_policy(tmp_path / "ec2.yaml", provider={"kind": "ec2"}, agents={"transport": "ssh"}))
    assert model_root(cloud, state) == CLOUD_MODEL_ROOT and ensure_local_samples(cloud, state) == []


@pytest.mark.slow
def test_models_init_writes_keeps_and_never_overwrites_your_own(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "models"
    (root / "vgg19").mkdir(parents=True)
    (root / "vgg19" / "model.pt").write_bytes(b"my own model")
    (root / "vgg19" / "model.yaml").write_text("inputs: []\n")
    assert main(["models", "init", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{root}/ssd: images[3, 300, 300] -> boxes[8732, 4], scores[8732, 81] (written)" in out
    assert f"{root}/vgg19: images[3, 224, 224] -> logits[1000] (kept)" in out
    before = (root / "ssd" / "model.pt").stat().st_mtime_ns
    assert main(["models", "init", str(root), "--force"]) == 0
    assert (root / "vgg19" / "model.pt").read_bytes() == b"my own model"  # not a sample: never rewritten
    assert (root / "ssd" / "model.pt").stat().st_mtime_ns != before
    assert set(samples(load_any_profile(p) for p in BUNDLED_PROFILES.glob("*.yaml"))) == {
        p.name for p in root.iterdir()
    }


def test_models_init_with_a_bad_policy_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("fleet: a\ninstance_types: []\nworkloads: []\n")
    assert main(["models", "init", str(tmp_path / "m"), "--policy", str(bad)]) == 2
    assert f"{bad}: instance_types" in capsys.readouterr().err and not (tmp_path / "m").exists()
