"""Sample TorchScript models: the input and output tensors of a profiled model, and almost no work.

They let a fleet serve real inference before anyone has exported a model: `igniter models init
DIR` writes one per profiled model (DIR/<model>/model.pt + model.yaml, the layout of
`agents.model_root`), and `igniter run` with the local provider writes those its workloads need
into its default model root. `make demo` and the tests write the tiny x[8] -> y[4] one.

They are NOT the networks they are named after. Each pools its input to 32 features and maps them
through one linear head per output (a few thousand weights, seeded, so a server's answer can be
checked against torch's); an output with more than one dimension repeats its head over the leading
dimensions with a fixed offset per position. What is real is the contract a client sees: tensor
names, shapes and datatypes (KServe v2 metadata), and the bytes a request and an answer carry.

Imported only where torch is installed (the agent extra); nothing here reads the autoscaler.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml

FEATURES = 32
FP32_BYTES = 4


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    datatype: str = "FP32"

    def to_yaml(self) -> dict[str, object]:
        return {"name": self.name, "shape": list(self.shape), "datatype": self.datatype}

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * FP32_BYTES


@dataclass(frozen=True)
class Sample:
    """A model's tensors, in model.yaml's positional order."""

    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]

    def describe(self) -> str:
        def side(ts: tuple[Tensor, ...]) -> str:
            return ", ".join(f"{t.name}{list(t.shape)}" for t in ts)

        return f"{side(self.inputs)} -> {side(self.outputs)}"


def _classifier(side: int) -> Sample:
    return Sample((Tensor("images", (3, side, side)),), (Tensor("logits", (1000,)),))


# The profiled models' real tensors: ImageNet classifiers take a 3x224x224 image and give 1000
# scores; SSD300 takes 3x300x300 and gives 8732 default boxes' offsets and 81 class scores each.
# Their FP32 sizes are the profiles' input/output_bytes_per_request (a test checks they agree).
KNOWN: dict[str, Sample] = {
    "alexnet": _classifier(224),
    "resnet50": _classifier(224),
    "vgg19": _classifier(224),
    "ssd": Sample((Tensor("images", (3, 300, 300)),), (Tensor("boxes", (8732, 4)), Tensor("scores", (8732, 81)))),
}
TINY = Sample((Tensor("x", (8,)),), (Tensor("y", (4,)),))


def sample_for(model: str, input_bytes: int, output_bytes: int) -> Sample:
    """The known tensors of `model` when its sizes match; else one flat FP32 input and output of
    the sizes a profile gives (what any model measured by `igniter-agent profile` has)."""
    known = KNOWN.get(model)
    if known is not None and _bytes(known.inputs) == input_bytes and _bytes(known.outputs) == output_bytes:
        return known
    n_in, n_out = max(1, input_bytes // FP32_BYTES), max(1, output_bytes // FP32_BYTES)
    return Sample((Tensor("input", (n_in,)),), (Tensor("output", (n_out,)),))


def sample_unsized(model: str) -> Sample:
    """A model whose profile gives no tensor sizes (a measured MIG table has latencies, not
    tensors): its known tensors by name, else TINY, the cheapest sample that still serves."""
    return KNOWN.get(model, TINY)


def _bytes(tensors: tuple[Tensor, ...]) -> int:
    return sum(t.nbytes for t in tensors)


def write(directory: Path, sample: Sample, seed: int = 0) -> Path:
    """Write model.pt (traced TorchScript) and model.yaml into `directory`; returns it."""
    import torch

    module = _build(sample, seed).eval()
    example = tuple(torch.zeros((2, *t.shape)) for t in sample.inputs)
    directory.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer and TorchScript deprecation notes
        # check_trace=False: the check traces again and compares (1.3 of the 1.4 s of CPU that
        # `igniter run` spent writing four samples, before its first tick); the forward has no
        # data-dependent control flow to catch, and tests/fleet/test_samples.py runs each sample
        # at other batch sizes than the trace's.
        traced = torch.jit.trace(module, example if len(example) > 1 else example[0], check_trace=False)
        traced.save(str(directory / "model.pt"))
    config = {"inputs": [t.to_yaml() for t in sample.inputs], "outputs": [t.to_yaml() for t in sample.outputs]}
    (directory / "model.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return directory


def _build(sample: Sample, seed: int):  # type: ignore[no-untyped-def]  # a torch.nn.Module
    import torch

    class SampleModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(seed)
            self.heads = torch.nn.ModuleList(torch.nn.Linear(FEATURES, t.shape[-1]) for t in sample.outputs)
            for i, t in enumerate(sample.outputs):
                positions = math.prod(t.shape[:-1])
                offset = torch.linspace(-1.0, 1.0, positions).reshape(*t.shape[:-1], 1)
                self.register_buffer(f"offset{i}", offset)

        def forward(self, *xs: torch.Tensor):  # type: ignore[no-untyped-def]
            pooled = [torch.nn.functional.adaptive_avg_pool1d(x.flatten(1).unsqueeze(1), FEATURES) for x in xs]
            features = torch.stack(pooled).sum(0).squeeze(1)
            outs = []
            for i, (head, t) in enumerate(zip(self.heads, sample.outputs)):
                y = head(features)
                for _ in t.shape[:-1]:
                    y = y.unsqueeze(1)
                outs.append(y + getattr(self, f"offset{i}") if len(t.shape) > 1 else y)
            return tuple(outs) if len(outs) > 1 else outs[0]

    return SampleModel()
