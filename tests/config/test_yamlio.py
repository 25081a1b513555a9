"""config/yamlio.py's fast path (libyaml, for profiles) against the Python loader: the same values
for what both read, and for anything wrong the Python loader's own error, word for word."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config import yamlio
from autoscaler.config.limits import MAX_DEPTH
from tests.conftest import ROOT
from tests.kit.examples import examples
from tests.kit.mig import import_a100, needs_shared

pytestmark = pytest.mark.unit
needs_libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML was built without libyaml")

BAD = [
    "a: 1\na: 2\n",  # a key twice
    "a:\n  b: 1\n  c: {d: 1, d: 2}\n",  # a key twice, in a flow mapping
    "x: " + "9" * 40 + "\n",  # an integer past MAX_INT_DIGITS
    "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1),  # nested past MAX_DEPTH
    "a: [1, 2\n",  # libyaml words this one otherwise
    "a: @x\n",
    "x:\n  - a\n - b\n",
    "a: *nope\n",
    "a: 1\n---\nb: 2\n",
    "a: !!python/object:os.system x\n",
]


def _outcome(text: str, fast: bool) -> tuple[str, object]:
    try:
        return "ok", yamlio.load_yaml(text, fast=fast)
    except yaml.YAMLError as exc:
        return type(exc).__name__, str(exc)


@needs_libyaml
@pytest.mark.parametrize("text", BAD, ids=range(len(BAD)))
def test_a_bad_document_gets_the_python_loaders_error(text: str) -> None:
    plain = _outcome(text, fast=False)
    assert plain[0] != "ok", plain
    assert _outcome(text, fast=True) == plain


def test_the_depth_ceiling_holds_on_the_fast_path_exactly_at_its_edge() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    fast = _outcome(deep, fast=True)
    assert fast[0] == "ok" and fast == _outcome(deep, fast=False)
    assert _outcome("[" + deep + "]", fast=True)[0] == "PastCeiling"


@needs_libyaml
@needs_shared
def test_profiles_read_the_same_on_both_paths(tmp_path: Path) -> None:
    """The bundled fitted profiles and the imported MIG one (what `fast` is for): equal values, and the
    `1e3` resolver (an exponent without a sign is a float) on both."""
    bundled = ROOT / "policies" / "profiles"
    files = [bundled / "v100.yaml", bundled / "t4-synthetic.yaml", import_a100(tmp_path)]
    for path in files:
        text = path.read_text()
        assert yamlio.load_yaml(text, fast=True) == yamlio.load_yaml(text), path
    assert yamlio.load_yaml("a: 1e3\nb: 1.5E-2\n", fast=True) == {"a": 1000.0, "b": 0.015}


scalars = st.one_of(
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
)
documents = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


@pytest.mark.property
@needs_libyaml
@settings(max_examples=examples(60), deadline=None)
@given(doc=documents, flow=st.booleans())
def test_any_dumped_document_reads_the_same_on_both_paths(doc: object, flow: bool) -> None:
    text = yaml.safe_dump({"doc": doc}, default_flow_style=flow, allow_unicode=True)
    assert _outcome(text, fast=True) == _outcome(text, fast=False)
