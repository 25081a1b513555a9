"""Every Terraform file parses; variables and outputs are documented and validated; skips have reasons."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.terraform.tfhelpers import (
    AUTOSCALER_DIR,
    FLEET_DIR,
    TF_DIR,
    load_hcl,
    terraform_console,
    terraform_env,
    tf_files,
)

SKIP_COMMENT = re.compile(r"#\s*checkov:skip=([A-Z0-9_]+)(?::(.*))?$")


@pytest.mark.unit
def test_terraform_tree_has_the_modules_and_example() -> None:
    for rel in ("modules/fleet", "modules/autoscaler", "modules/gateway", "examples/basic"):
        assert list((TF_DIR / rel).glob("*.tf")), f"terraform/{rel} has no .tf files"


@pytest.mark.unit
@pytest.mark.parametrize("path", tf_files(), ids=lambda p: str(p.relative_to(TF_DIR)))
def test_python_hcl2_parses(path: Path) -> None:
    parsed = load_hcl(path)
    assert parsed, f"{path} parsed to nothing"


@pytest.mark.unit
@pytest.mark.parametrize("module_dir", [FLEET_DIR, AUTOSCALER_DIR], ids=["fleet", "autoscaler"])
def test_variables_are_typed_and_described(module_dir: Path, request: pytest.FixtureRequest) -> None:
    config = request.getfixturevalue(module_dir.name)
    problems = []
    for name, body in config["variable"].items():
        if not body.get("type"):
            problems.append(f"{name}: no type")
        if len(str(body.get("description", ""))) < 20:
            problems.append(f"{name}: no real description")
    assert not problems, problems


@pytest.mark.unit
@pytest.mark.parametrize("module_dir", [FLEET_DIR, AUTOSCALER_DIR], ids=["fleet", "autoscaler"])
def test_outputs_are_described(module_dir: Path, request: pytest.FixtureRequest) -> None:
    config = request.getfixturevalue(module_dir.name)
    undescribed = [name for name, body in config["output"].items() if not body.get("description")]
    assert not undescribed


@pytest.mark.unit
def test_security_relevant_variables_are_validated(fleet: dict[str, Any], autoscaler: dict[str, Any]) -> None:
    must_validate = {
        "fleet": [
            "name",
            "allowed_cidr_blocks",
            "instance_types",
            "autoscaler_ssh_public_key",
            "igniter_package",
            "model_bucket",
            "model_prefix",
            "server_port_range",
            "ssh_port",
            "ami_id",
            "tags",
        ],
        "autoscaler": [
            "name",
            "launch_template_arns",
            "node_role_arn",
            "subnet_ids",
            "node_security_group_ids",
            "status_cidr_blocks",
            "igniter_package",
            "tags",
        ],
    }
    for module, config in (("fleet", fleet), ("autoscaler", autoscaler)):
        missing = [v for v in must_validate[module] if not config["variable"][v].get("validation")]
        assert not missing, f"{module}: no validation block on {missing}"


@pytest.mark.e2e
def test_every_checkov_skip_states_a_reason() -> None:
    """A skip is allowed only in the code, next to the resource, with a written reason."""
    skips = []
    for path in TF_DIR.rglob("*.tf"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = SKIP_COMMENT.search(line.strip())
            if match:
                skips.append((f"{path.relative_to(TF_DIR)}:{number}", match.group(1), (match.group(2) or "").strip()))
    assert skips, "expected the documented skips (KMS key policies, SSH key rotation)"
    unexplained = [s for s in skips if len(s[2]) < 40]
    assert not unexplained, f"checkov skips without a real reason: {unexplained}"


@pytest.mark.e2e
def test_terraform_fmt_clean(needs_terraform: str) -> None:
    result = subprocess.run(
        [needs_terraform, "fmt", "-check", "-recursive", "-diff", str(TF_DIR)],
        capture_output=True,
        text=True,
        timeout=120,
        env=terraform_env(),
    )
    assert result.returncode == 0, f"terraform fmt would change:\n{result.stdout}{result.stderr}"


def _provider_mirror() -> Path | None:
    """A local provider mirror with hashicorp/aws (TF_PLUGIN_DIR, else /opt/tf-plugins), if any."""
    mirror = Path(os.environ.get("TF_PLUGIN_DIR", "/opt/tf-plugins"))
    return mirror if (mirror / "registry.terraform.io" / "hashicorp" / "aws").is_dir() else None


@pytest.mark.e2e
@pytest.mark.parametrize("config", ["examples/basic", "modules/fleet", "modules/autoscaler"])
def test_terraform_validate_with_a_local_provider_mirror(needs_terraform: str, tmp_path: Path, config: str) -> None:
    """`terraform validate` against the real AWS provider schema, offline. Not a plan: no AWS calls."""
    mirror = _provider_mirror()
    if mirror is None:
        pytest.skip("no local provider mirror with hashicorp/aws (set TF_PLUGIN_DIR); downloads are not possible here")
    shutil.copytree(TF_DIR, tmp_path / "terraform", ignore=shutil.ignore_patterns(".terraform", "*.tfstate*"))
    shutil.copytree(TF_DIR.parent / "deploy", tmp_path / "deploy")  # the modules read deploy/systemd's units
    workdir = tmp_path / "terraform" / config
    init = subprocess.run(
        [needs_terraform, "init", "-backend=false", "-input=false", "-no-color", f"-plugin-dir={mirror}"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env=terraform_env(),
    )
    assert init.returncode == 0, init.stdout + init.stderr
    validate = subprocess.run(
        [needs_terraform, "validate", "-no-color"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env=terraform_env(),
    )
    assert validate.returncode == 0, validate.stdout + validate.stderr


# --- variable validations, evaluated by terraform console on the variables file alone ----------

FLEET_REQUIRED = {
    "name": "igniter",
    "igniter_package": "igniter-autoscaler==0.1.0",
    "autoscaler_ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7d9Kq3 igniter@test",
    "model_bucket": "team-models",
}


@pytest.fixture(scope="module")
def fleet_variables_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("fleet-vars")
    shutil.copy(FLEET_DIR / "variables.tf", workdir / "variables.tf")
    return workdir


def _invalid(workdir: Path, variable: str, **overrides: str) -> bool:
    result = terraform_console(workdir, f"var.{variable}", {**FLEET_REQUIRED, **overrides})
    return "Invalid value for variable" in result.stderr and f'variable "{variable}"' in result.stderr


@pytest.mark.unit
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("allowed_cidr_blocks", '["0.0.0.0/0"]'),
        ("allowed_cidr_blocks", '["10.0.0.0/8", "::/0"]'),
        ("allowed_cidr_blocks", '["not-a-cidr"]'),
        ("name", "bad name"),
        ("name", "a" * 25),
        ("agent_user", "root"),
        ("agent_user", "ubuntu"),
        ("instance_types", '["m5.large"]'),
        ("instance_types", "[]"),
        ("autoscaler_ssh_public_key", "ssh-ed25519 AAAA\nssh-rsa BBBB"),
        ("igniter_package", 'pkg"; rm -rf /'),
        ("model_prefix", "/models"),
        ("tags", '{"igniter:fleet" = "other"}'),
        ("egress_cidr_blocks", "[]"),
        ("server_port_range", "{ from = 80, to = 8199 }"),
    ],
)
def test_fleet_variable_validation_refuses(
    needs_terraform: str, fleet_variables_dir: Path, variable: str, value: str
) -> None:
    assert _invalid(fleet_variables_dir, variable, **{variable: value}), f"{variable}={value!r} was accepted"


@pytest.mark.unit
def test_fleet_variable_validation_accepts_defaults_and_private_cidrs(
    needs_terraform: str, fleet_variables_dir: Path
) -> None:
    result = terraform_console(
        fleet_variables_dir,
        "jsonencode([var.allowed_cidr_blocks, var.instance_types])",
        {**FLEET_REQUIRED, "allowed_cidr_blocks": '["10.0.0.0/16", "fd00::/8"]'},
    )
    assert "Error" not in result.stderr, result.stderr
    assert "g4dn.xlarge" in result.stdout
