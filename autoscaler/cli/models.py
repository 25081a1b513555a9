"""`igniter models init DIR [--policy POLICY] [--force]`: write sample TorchScript models.

One directory per model (DIR/<model>/model.pt + model.yaml, the layout `agents.model_root` reads),
with the tensors of the profiled model and almost no work (agents/samples.py): enough for a fleet
to serve real requests before your own models are exported. Without --policy: every model of the
bundled profiles; with it: the models its workloads use, sized by its profiles. A directory that
holds a model already is kept; --force rewrites earlier samples, never a model of your own.

Needs PyTorch (the agent extra). Exit codes: 0 written or kept; 1 no PyTorch; 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

DESCRIPTION = """Write small sample TorchScript models (model.pt + model.yaml per model) with the tensors of the
profiled models: ImageNet classifiers take images[3,224,224] and give logits[1000]; ssd takes
images[3,300,300] and gives boxes[8732,4] and scores[8732,81]. They are not the real networks."""


def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("models", help="sample models for a fleet to serve", description=DESCRIPTION)
    sub = p.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    init = sub.add_parser("init", help="write sample models into DIR/<model>/", description=DESCRIPTION)
    init.add_argument("dir", type=Path, help="the model root (agents.model_root)")
    init.add_argument("--policy", type=Path, help="only the models this policy's workloads use, sized by its profiles")
    init.add_argument("--force", action="store_true", help="rewrite sample models written earlier")
    init.set_defaults(func=cmd_init)
    return p


def cmd_init(args: argparse.Namespace) -> int:
    from autoscaler.fleet.samples import SAMPLE_MARK, missing, write_samples

    wanted = _wanted(args.policy)
    root: Path = args.dir
    redo = {n for n in wanted if args.force and (root / n / SAMPLE_MARK).is_file()}
    todo = sorted(set(missing(root, wanted)) | redo)
    try:
        write_samples(root, {n: wanted[n] for n in todo})
    except ImportError as exc:
        print(f"error: sample models need PyTorch ({exc}): pip install 'igniter-autoscaler[agent]'", file=sys.stderr)
        return 1
    for name, sample in sorted(wanted.items()):
        print(f"{root / name}: {sample.describe()} ({'written' if name in todo else 'kept'})")
    return 0


def _wanted(policy_path: Path | None) -> dict[str, Any]:
    """Model name -> Sample: the bundled profiles' models, or the models a policy's workloads use."""
    from autoscaler.config.policy import BUNDLED_PROFILES, load_policy, load_profiles
    from autoscaler.config.profile import load_any_profile
    from autoscaler.fleet.samples import samples

    if policy_path is None:
        return samples(load_any_profile(p) for p in sorted(BUNDLED_PROFILES.glob("*.yaml")))
    policy = load_policy(policy_path)
    every = samples(load_profiles(policy).values())
    return {w.model: every[w.model] for w in policy.workloads}
