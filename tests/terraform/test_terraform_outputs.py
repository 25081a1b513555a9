"""The example's outputs, stood in for by fixtures/outputs.json, make a policy the loader accepts.

fixtures/outputs.json is shaped like `terraform output -json` for examples/basic with the default
instance types. The first tests pin it to the configuration (same output names, same snippet keys,
launch template names as the fleet module builds them), so it cannot drift from what Terraform would
print; the last ones merge it into a hand-written policy and validate the result.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.config.errors import InputError
from autoscaler.config.policy import load_policy
from tests.terraform.tfhelpers import DEFAULT_INSTANCE_TYPES, FIXTURES, terraform_string, unwrap


@pytest.fixture(scope="module")
def outputs() -> dict[str, Any]:
    return json.loads((FIXTURES / "outputs.json").read_text())


@pytest.fixture(scope="module")
def snippet(outputs: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(outputs["policy_snippet_yaml"]["value"])


def _key_tree(value: Any) -> Any:
    return {k: _key_tree(v) for k, v in value.items()} if isinstance(value, dict) else None


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def write_policy(tmp_path: Path, snippet: dict[str, Any]) -> Path:
    base = yaml.safe_load((FIXTURES / "policy-base.yaml").read_text())
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(deep_merge(base, snippet), sort_keys=False))
    return path


# --- the fixture is what the example would print -----------------------------------------------------


@pytest.mark.unit
def test_fixture_has_exactly_the_example_outputs(outputs: dict[str, Any], example: dict[str, Any]) -> None:
    assert set(outputs) == set(example["output"])
    for entry in outputs.values():
        assert set(entry) == {"sensitive", "type", "value"} and entry["sensitive"] is False


@pytest.mark.unit
def test_snippet_outputs_come_from_the_one_local(example: dict[str, Any]) -> None:
    assert unwrap(example["output"]["policy_snippet"]["value"]) == "local.policy_snippet"
    assert unwrap(example["output"]["policy_snippet_yaml"]["value"]) == "yamlencode(local.policy_snippet)"
    assert unwrap(example["output"]["launch_template_names"]["value"]) == "module.fleet.launch_template_names"


@pytest.mark.unit
def test_fixture_snippet_has_the_keys_of_the_local(
    outputs: dict[str, Any], snippet: dict[str, Any], example: dict[str, Any], gateway: dict[str, Any]
) -> None:
    expected = _key_tree(example["locals"]["policy_snippet"])
    expected["provider"]["launch_templates"] = {t: None for t in DEFAULT_INSTANCE_TYPES}
    assert unwrap(example["locals"]["policy_snippet"]["gateway"]) == "module.gateway.policy_snippet.gateway"
    expected["gateway"] = _key_tree(gateway["output"]["policy_snippet"]["value"]["gateway"])
    assert _key_tree(outputs["policy_snippet"]["value"]) == expected
    assert snippet == outputs["policy_snippet"]["value"]


@pytest.mark.unit
def test_fixture_launch_templates_are_named_as_the_fleet_module_names_them(
    outputs: dict[str, Any], fleet: dict[str, Any]
) -> None:
    names = outputs["launch_template_names"]["value"]
    assert sorted(names) == sorted(DEFAULT_INSTANCE_TYPES)
    assert fleet["resource"]["aws_launch_template"]["node"]["name"] == "${var.name}-${each.key}"
    fleet_name = outputs["policy_snippet"]["value"]["fleet"]
    assert names == {t: f"{fleet_name}-{t}" for t in DEFAULT_INSTANCE_TYPES}
    assert outputs["policy_snippet"]["value"]["provider"]["launch_templates"] == names


@pytest.mark.unit
def test_fixture_agent_settings_match_the_modules(
    snippet: dict[str, Any], fleet: dict[str, Any], autoscaler: dict[str, Any]
) -> None:
    agents = snippet["agents"]
    variables = fleet["variable"]
    assert agents["user"] == variables["agent_user"]["default"]
    assert agents["port"] == variables["ssh_port"]["default"]
    assert agents["server_base_port"] == variables["server_port_range"]["default"]["from"]
    assert agents["state_dir"] == fleet["locals"]["state_dir"]
    assert agents["key_file"] == autoscaler["locals"]["ssh_key_file"]
    assert agents["known_hosts"] == autoscaler["locals"]["known_hosts_file"]


@pytest.mark.unit
def test_fixture_yaml_is_what_terraform_yamlencode_prints(
    needs_terraform: str, outputs: dict[str, Any], tmp_path: Path
) -> None:
    value = json.dumps(outputs["policy_snippet"]["value"])
    assert (
        terraform_string(tmp_path, f"yamlencode(jsondecode({json.dumps(value)}))")
        == outputs["policy_snippet_yaml"]["value"]
    )


# --- merged into a policy, it validates -----------------------------------------------------------


@pytest.mark.unit
def test_merged_policy_loads(tmp_path: Path, snippet: dict[str, Any]) -> None:
    policy = load_policy(write_policy(tmp_path, snippet))
    assert policy.fleet == "igniter"
    assert policy.provider.kind == "ec2"
    assert policy.provider.region == "us-east-1"
    assert policy.provider.launch_templates == snippet["provider"]["launch_templates"]
    assert policy.provider.subnets == snippet["provider"]["subnets"]
    assert policy.agents.transport == "ssh"
    assert policy.agents.key_file == "/etc/igniter/ssh/id_autoscaler"
    assert policy.agents.server_base_port == 8100
    for itype in policy.instance_types:
        assert itype.name in policy.provider.launch_templates, f"{itype.name} has no launch template"
    assert (policy.gateway.kind, policy.gateway.discover, policy.gateway.listen) == ("haproxy", True, "0.0.0.0:8000")


@pytest.mark.unit
def test_a_broken_snippet_is_reported_by_field(tmp_path: Path, snippet: dict[str, Any]) -> None:
    broken = deep_merge(snippet, {"provider": {"kind": "gce"}})
    with pytest.raises(InputError) as caught:
        load_policy(write_policy(tmp_path, broken))
    assert caught.value.field == "provider.kind"


def _igniter_validate_available() -> Path | None:
    script = Path(sys.executable).with_name("igniter")
    if not script.exists():
        return None
    probe = subprocess.run([str(script), "validate", "--help"], capture_output=True, text=True, timeout=60)
    return script if probe.returncode == 0 else None


@pytest.mark.e2e
def test_merged_policy_passes_igniter_validate(tmp_path: Path, snippet: dict[str, Any]) -> None:
    script = _igniter_validate_available()
    if script is None:
        pytest.skip("`igniter validate` is not available in this environment yet; load_policy covers the merge")
    good = subprocess.run(
        [str(script), "validate", str(write_policy(tmp_path, snippet))], capture_output=True, text=True, timeout=120
    )
    assert good.returncode == 0, good.stderr
    bad = subprocess.run(
        [str(script), "validate", str(write_policy(tmp_path, deep_merge(snippet, {"fleet": "bad name"})))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "fleet" in bad.stderr
