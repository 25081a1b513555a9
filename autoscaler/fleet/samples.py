"""Where models live on this machine's instances, and the sample models that fill it.

A workload's model directory is its `model_dir`, else `<agents.model_root>/<model>`. On cloud nodes
the root defaults to /var/lib/igniter/models (what the VM image or cloud-init puts there). With the
local provider the instances are processes on this machine, so the root defaults to `models`
beside the state file, and `igniter run` writes there, once, a sample model (agents/samples.py:
the profiled model's tensors, almost no work) for every model a workload needs and nobody has
put there: the fleet serves real requests on a fresh clone with no hand work. A root set in the
policy is the operator's: nothing is written into it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from agents.samples import Sample, sample_for, sample_unsized, write
from autoscaler.config.policy import CLOUD_MODEL_ROOT, Policy, load_profiles
from autoscaler.config.profile import AnyProfile, MeasuredProfile

log = logging.getLogger(__name__)
SAMPLE_MARK = ".igniter-sample"  # written beside a sample, so nobody mistakes it for a real model


def model_root(policy: Policy, state_path: Path) -> str:
    """agents.model_root, else the provider's default (see the module docstring)."""
    if policy.agents.model_root:
        return policy.agents.model_root
    return str(state_path.parent.resolve() / "models") if policy.provider.kind == "local" else CLOUD_MODEL_ROOT


def samples(profiles: Iterable[AnyProfile]) -> dict[str, Sample]:
    """A sample per profiled model (the first profile that has it gives its sizes; a measured MIG
    profile gives none: agents/samples.py sample_unsized)."""
    out: dict[str, Sample] = {}
    for profile in profiles:
        if isinstance(profile, MeasuredProfile):
            for name in profile.models:
                out.setdefault(name, sample_unsized(name))
            continue
        for name, m in profile.models.items():
            out.setdefault(name, sample_for(name, int(m.input_bytes_per_request), int(m.output_bytes_per_request)))
    return out


def missing(root: Path, names: Iterable[str]) -> list[str]:
    """Models without both model.pt and model.yaml under root."""
    return sorted(
        n for n in set(names) if not ((root / n / "model.pt").is_file() and (root / n / "model.yaml").is_file())
    )


def write_samples(root: Path, wanted: dict[str, Sample]) -> list[Path]:
    """Write each sample to root/<model>/ (torch is imported here, only when there is work)."""
    written = []
    for name, sample in sorted(wanted.items()):
        directory = write(root / name, sample)
        (directory / SAMPLE_MARK).write_text(f"sample model: {sample.describe()}\n", encoding="utf-8")
        written.append(directory)
    return written


def ensure_local_samples(policy: Policy, state_path: Path) -> list[Path]:
    """With the local provider and no model_root in the policy: write the missing sample models of
    the workloads without a model_dir. Returns the directories written (none: nothing to do)."""
    if policy.provider.kind != "local" or policy.agents.model_root or policy.agents.transport == "none":
        return []
    root = Path(model_root(policy, state_path))
    needed = missing(root, (w.model for w in policy.workloads if not w.model_dir))
    if not needed:
        return []
    every = samples(load_profiles(policy).values())
    try:
        written = write_samples(root, {n: every[n] for n in needed})
    except ImportError as exc:  # a central-only install: its agents could not serve either
        log.error("cannot write sample models to %s (%s): install the agent extra", root, exc)
        return []
    log.info(
        "wrote sample models for %s to %s (real tensors, no real network; see `igniter models init`); "
        "set agents.model_root or workloads[].model_dir to serve your own",
        ", ".join(needed),
        root,
    )
    return written
