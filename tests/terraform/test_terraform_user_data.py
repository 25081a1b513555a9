"""The cloud-init user data: rendered like templatefile() does, then parsed and its scripts checked."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.terraform.tfhelpers import (
    AUTOSCALER_DIR,
    FLEET_DIR,
    ROOT,
    render_template,
    template_placeholders,
    templatefile_call_keys,
    terraform_string,
)

NODE_TEMPLATE = FLEET_DIR / "templates" / "node-user-data.yaml.tftpl"
HOST_TEMPLATE = AUTOSCALER_DIR / "templates" / "autoscaler-user-data.yaml.tftpl"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7d9Kq3Xexample igniter-autoscaler"
PACKAGE = "igniter-autoscaler>=0.1,<1"  # has shell metacharacters on purpose
POLICY = "fleet: igniter\ninstance_types: []\n"
UNITS = ROOT / "deploy" / "systemd"


def unit_var(name: str) -> str:
    """What `indent(6, trimspace(file(".../deploy/systemd/NAME")))` gives Terraform's templatefile."""
    return (UNITS / name).read_text().strip().replace("\n", "\n" + " " * 6)


def node_vars(fleet: dict[str, Any]) -> dict[str, Any]:
    variables = fleet["variable"]
    return {
        "fleet": "igniter",
        "region": "us-east-1",
        "agent_user": variables["agent_user"]["default"],
        "ssh_public_key": KEY,
        "igniter_package": PACKAGE,
        "state_dir": fleet["locals"]["state_dir"],
        "model_source": "s3://team-models/" + variables["model_prefix"]["default"],
        "model_dir": variables["model_dir"]["default"],
        "model_sync_interval": variables["model_sync_interval"]["default"],
        "install_cloudwatch_agent": "true",
        "mig": "false",
        "agent_unit": unit_var("igniter-agent.service"),
        "gpu_setup_unit": unit_var("igniter-gpu-setup.service"),
    }


def host_vars(autoscaler: dict[str, Any], policy_file: str | None = None) -> dict[str, Any]:
    locals_ = autoscaler["locals"]
    return {
        "fleet": "igniter",
        "region": "us-east-1",
        "igniter_package": PACKAGE,
        "ssh_key_secret_arn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:igniter/igniter/autoscaler-ssh-key-AbCdEf",
        "ssh_key_file": locals_["ssh_key_file"],
        "known_hosts_file": locals_["known_hosts_file"],
        "policy_file": policy_file or locals_["policy_file"],
        "policy_b64": base64.b64encode(POLICY.encode()).decode(),
        "autoscaler_unit": unit_var("igniter.service"),
    }


def cloud_config(text: str) -> dict[str, Any]:
    assert text.startswith("#cloud-config\n"), "cloud-init needs the #cloud-config header on line 1"
    return yaml.safe_load(text)


def files(config: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["content"] for f in config["write_files"]}


def unit(text: str) -> dict[str, list[str]]:
    """systemd unit -> {key: [values]} (sections flattened; keys repeat, e.g. ExecStartPre)."""
    parsed: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            parsed.setdefault(key.strip(), []).append(value.strip())
    return parsed


def bash_syntax_ok(script: str, tmp_path: Path) -> None:
    path = tmp_path / "script.sh"
    path.write_text(script)
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def node(fleet: dict[str, Any]) -> dict[str, Any]:
    return cloud_config(render_template(NODE_TEMPLATE.read_text(), node_vars(fleet)))


@pytest.fixture(scope="module")
def host(autoscaler: dict[str, Any]) -> dict[str, Any]:
    return cloud_config(render_template(HOST_TEMPLATE.read_text(), host_vars(autoscaler)))


# --- both templates ----------------------------------------------------------------------------------


@pytest.mark.unit
@pytest.mark.parametrize(
    ("template", "tf_file"),
    [(NODE_TEMPLATE, FLEET_DIR / "launch_templates.tf"), (HOST_TEMPLATE, AUTOSCALER_DIR / "host.tf")],
    ids=["node", "host"],
)
def test_templatefile_call_passes_exactly_the_placeholders(template: Path, tf_file: Path) -> None:
    assert template_placeholders(template.read_text()) == templatefile_call_keys(tf_file.read_text(), template.name)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("template", "kind"), [(NODE_TEMPLATE, "fleet"), (HOST_TEMPLATE, "autoscaler")], ids=["node", "host"]
)
def test_python_render_matches_terraform_templatefile(
    needs_terraform: str, tmp_path: Path, template: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    config = request.getfixturevalue(kind)
    variables = node_vars(config) if kind == "fleet" else host_vars(config)
    shutil.copy(template, tmp_path / template.name)
    # an HCL string literal interpolates ${...}: the units' own ${VAR} (systemd's) are escaped, as
    # file() in the module never interpolates them
    literal = {n: json.dumps(v).replace("${", "$${").replace("%{", "%%{") for n, v in variables.items()}
    arguments = ", ".join(f"{name} = {value}" for name, value in literal.items())
    rendered = terraform_string(tmp_path, f'templatefile("{template.name}", {{ {arguments} }})')
    assert rendered == render_template(template.read_text(), variables)


# --- the GPU node ------------------------------------------------------------------------------------


@pytest.mark.unit
def test_node_authorises_the_autoscaler_key_for_the_unprivileged_agent_user_only(node: dict[str, Any]) -> None:
    assert "ssh_authorized_keys" not in node, "the key must not go to the sudo-capable default user"
    default, agent = node["users"]
    assert default == "default"
    assert agent["name"] == "igniter" and agent["lock_passwd"] is True
    assert agent["ssh_authorized_keys"] == [f"restrict {KEY}"]
    assert "sudo" not in agent and "groups" not in agent


@pytest.mark.unit
def test_node_prints_its_ssh_host_keys_to_the_console(node: dict[str, Any]) -> None:
    """The autoscaler pins a new node's host key from its console (ec2:GetConsoleOutput): nothing
    may keep cloud-init from printing every key type there, whatever the AMI's cloud.cfg says."""
    assert node["ssh"]["emit_keys_to_console"] is True
    assert node["ssh_key_console_blacklist"] == []
    assert node["ssh_fp_console_blacklist"] == []
    assert node["no_ssh_fingerprints"] is False


@pytest.mark.unit
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/etc/systemd/system/igniter-agent.service", "igniter-agent.service"),
        ("/etc/systemd/system/igniter-gpu-setup.service", "igniter-gpu-setup.service"),
    ],
)
def test_node_installs_the_deploy_units_verbatim(node: dict[str, Any], path: str, name: str) -> None:
    assert files(node)[path] == (UNITS / name).read_text().strip() + "\n"


@pytest.mark.unit
def test_host_installs_the_deploy_unit_verbatim(host: dict[str, Any]) -> None:
    assert files(host)["/etc/systemd/system/igniter.service"] == (UNITS / "igniter.service").read_text().strip() + "\n"


@pytest.mark.unit
def test_node_starts_the_agent_as_a_systemd_service(node: dict[str, Any]) -> None:
    written = files(node)
    agent = unit(written["/etc/systemd/system/igniter-agent.service"])
    agent_user = unit(written["/etc/systemd/system/igniter-agent.service.d/10-fleet.conf"])
    cmd = "/opt/igniter/venv/bin/igniter-agent run --state-dir ${IGNITER_STATE_DIR} --log-format ${IGNITER_LOG_FORMAT}"
    assert agent["ExecStart"] == [cmd]
    assert 'IGNITER_STATE_DIR="/var/lib/igniter"' in written["/etc/igniter/node.env"]
    assert agent_user["User"] == ["igniter"], "the daemon must run as the SSH user: they share 0600 state files"
    assert agent["Restart"] == ["always"]
    assert agent["WantedBy"] == ["multi-user.target"]
    assert agent["EnvironmentFile"] == ["-/etc/igniter/node.env"]
    assert "igniter-gpu-setup.service" in agent["After"][0]
    setup = files(node)["/usr/local/sbin/igniter-node-setup"]
    assert "systemctl enable --now igniter-agent.service" in setup
    assert node["runcmd"] == [["/usr/local/sbin/igniter-node-setup"]]


INSTALL = '/opt/igniter/venv/bin/pip install --quiet "$(agent_requirement "$IGNITER_PACKAGE")"'
HOST_INSTALL = '/opt/igniter/venv/bin/pip install --quiet "$(service_requirement "$IGNITER_PACKAGE")"'


@pytest.mark.e2e
def test_node_installs_the_project_with_its_agent_extra(node: dict[str, Any], tmp_path: Path) -> None:
    setup = files(node)["/usr/local/sbin/igniter-node-setup"]
    assert INSTALL in setup
    assert "ln -sf /opt/igniter/venv/bin/igniter-agent /usr/local/bin/igniter-agent" in setup
    assert setup.index(INSTALL) < setup.index("systemctl enable --now igniter-agent.service")
    bash_syntax_ok(setup, tmp_path)


def _shell_function(script: str, name: str) -> str:
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{name}() {{")
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "}")
    return "\n".join(lines[start : end + 1])


def _call(script: str, name: str, argument: str) -> str:
    """What the script's shell function `name` prints for one argument (its last newline dropped)."""
    function = _shell_function(script, name)
    done = subprocess.run(
        ["bash", "-euc", f'{function}\n{name} "$1"', "bash", argument], capture_output=True, text=True, check=True
    )
    return done.stdout.removesuffix("\n")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("package", "requirement"),
    [
        (PACKAGE, "igniter-autoscaler[agent]>=0.1,<1"),
        ("igniter-autoscaler==0.1.0", "igniter-autoscaler[agent]==0.1.0"),
        ("igniter-autoscaler", "igniter-autoscaler[agent]"),
        ("igniter-autoscaler[agent]==0.1.0", "igniter-autoscaler[agent]==0.1.0"),
        (
            "git+https://github.com/ORG/REPO@v0.1.0",
            "igniter-autoscaler[agent] @ git+https://github.com/ORG/REPO@v0.1.0",
        ),
        (
            "https://example.com/igniter_autoscaler-0.1.0-py3-none-any.whl",
            "igniter-autoscaler[agent] @ https://example.com/igniter_autoscaler-0.1.0-py3-none-any.whl",
        ),
        (
            "/opt/wheels/igniter_autoscaler-0.1.0-py3-none-any.whl",
            "/opt/wheels/igniter_autoscaler-0.1.0-py3-none-any.whl[agent]",
        ),
    ],
)
def test_node_adds_the_agent_extra_to_every_form_of_igniter_package(
    node: dict[str, Any], package: str, requirement: str
) -> None:
    """Every form terraform's igniter_package validation admits gets torch and NVML on the node."""
    assert _call(files(node)["/usr/local/sbin/igniter-node-setup"], "agent_requirement", package) == requirement


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("package", "requirement"),
    [
        (PACKAGE, "igniter-autoscaler[service]>=0.1,<1"),
        ("igniter-autoscaler", "igniter-autoscaler[service]"),
        (
            "git+https://github.com/ORG/REPO@v0.1.0",
            "igniter-autoscaler[service] @ git+https://github.com/ORG/REPO@v0.1.0",
        ),
        (
            "/opt/wheels/igniter_autoscaler-0.1.0-py3-none-any.whl",
            "/opt/wheels/igniter_autoscaler-0.1.0-py3-none-any.whl[service]",
        ),
    ],
)
def test_host_installs_the_service_extra(host: dict[str, Any], package: str, requirement: str) -> None:
    """The central service's libraries come with [service]: the host installs it, in every form."""
    setup = files(host)["/usr/local/sbin/igniter-autoscaler-setup"]
    assert HOST_INSTALL in setup
    assert _call(setup, "service_requirement", package) == requirement


@pytest.mark.unit
def test_node_state_dir_is_private_to_the_agent_user(node: dict[str, Any]) -> None:
    setup = files(node)["/usr/local/sbin/igniter-node-setup"]
    assert 'install -d -o "$IGNITER_AGENT_USER" -g "$IGNITER_AGENT_USER" -m 0700 "$IGNITER_STATE_DIR"' in setup


@pytest.mark.e2e
def test_node_env_file_survives_shell_and_systemd_quoting(node: dict[str, Any], tmp_path: Path) -> None:
    env = tmp_path / "node.env"
    env.write_text(files(node)["/etc/igniter/node.env"])
    result = subprocess.run(
        ["bash", "-c", f'set -a; . {env}; printf "%s|%s" "$IGNITER_PACKAGE" "$IGNITER_MODEL_SOURCE"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout == f"{PACKAGE}|s3://team-models/models/"


@pytest.mark.unit
def test_node_enables_mps(node: dict[str, Any]) -> None:
    gpu = unit(files(node)["/etc/systemd/system/igniter-gpu-setup.service"])
    assert gpu["ExecStart"] == [
        "/usr/bin/nvidia-smi --persistence-mode=1",
        "/usr/bin/nvidia-smi --compute-mode=EXCLUSIVE_PROCESS",
    ]
    mig = unit(files(node)["/etc/systemd/system/igniter-gpu-setup.service.d/mig.conf"])
    # before the compute mode (a GPU reset clears it); a no-op unless IGNITER_MIG=true (a MIG type)
    assert mig == {"EnvironmentFile": ["/etc/igniter/node.env"], "ExecStartPre": ["/usr/local/sbin/igniter-mig-mode"]}
    assert gpu["Type"] == ["oneshot"] and gpu["RemainAfterExit"] == ["yes"]
    assert "User" not in gpu, "compute mode needs root"
    setup = files(node)["/usr/local/sbin/igniter-node-setup"]
    assert setup.index("enable --now igniter-gpu-setup.service") < setup.index("enable --now igniter-agent.service")


@pytest.mark.e2e
def test_node_syncs_models_from_s3(node: dict[str, Any], tmp_path: Path) -> None:
    written = files(node)
    sync = written["/usr/local/sbin/igniter-model-sync"]
    assert 'aws s3 sync --only-show-errors --no-progress "$IGNITER_MODEL_SOURCE" "$IGNITER_MODEL_DIR"' in sync
    bash_syntax_ok(sync, tmp_path)
    timer = unit(written["/etc/systemd/system/igniter-model-sync.timer"])
    assert timer["OnUnitActiveSec"] == ["15min"]
    setup = written["/usr/local/sbin/igniter-node-setup"]
    assert setup.index("systemctl start igniter-model-sync.service") < setup.index("enable --now igniter-agent.service")


@pytest.mark.unit
def test_node_cloudwatch_agent_config_is_json_with_its_own_variables(node: dict[str, Any]) -> None:
    config = json.loads(files(node)["/etc/igniter/cloudwatch-agent.json"])
    assert config["metrics"]["append_dimensions"]["InstanceId"] == "${aws:InstanceId}"
    assert "utilization_gpu" in config["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]


# --- the autoscaler host -----------------------------------------------------------------------------


@pytest.mark.e2e
def test_host_runs_igniter_run_with_the_policy(host: dict[str, Any], tmp_path: Path) -> None:
    written = files(host)
    service = unit(written["/etc/systemd/system/igniter.service"])
    dropin = unit(written["/etc/systemd/system/igniter.service.d/10-fleet.conf"])
    assert service["ExecStart"] == [
        "/opt/igniter/venv/bin/igniter run /etc/igniter/policy.yaml --log-format ${IGNITER_LOG_FORMAT}"
    ]
    assert service["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert dropin["ExecStartPre"] == ["+/usr/local/sbin/igniter-fetch-ssh-key"]
    assert service["ConditionPathExists"] == ["/etc/igniter/policy.yaml"]
    assert service["User"] == ["igniter"] and service["Restart"] == ["always"]
    setup = written["/usr/local/sbin/igniter-autoscaler-setup"]
    assert "systemctl enable igniter.service" in setup
    bash_syntax_ok(setup, tmp_path)
    assert host["runcmd"] == [["/usr/local/sbin/igniter-autoscaler-setup"]]


@pytest.mark.unit
def test_host_fetches_its_key_from_the_secret(host: dict[str, Any]) -> None:
    written = files(host)
    script = written["/usr/local/sbin/igniter-fetch-ssh-key"]
    compile(script, "igniter-fetch-ssh-key", "exec")
    assert "get_secret_value(SecretId=secret_id)" in script and "0o600" in script
    env = written["/etc/igniter/autoscaler.env"]
    assert 'IGNITER_SSH_KEY_SECRET="arn:aws:secretsmanager:' in env
    assert 'IGNITER_SSH_KEY_FILE="/etc/igniter/ssh/id_autoscaler"' in env


@pytest.mark.e2e
def test_host_writes_the_policy_given_to_terraform(autoscaler: dict[str, Any], tmp_path: Path) -> None:
    target = tmp_path / "policy.yaml"
    config = cloud_config(render_template(HOST_TEMPLATE.read_text(), host_vars(autoscaler, str(target))))
    setup = files(config)["/usr/local/sbin/igniter-autoscaler-setup"].splitlines()
    start = next(i for i, line in enumerate(setup) if line.startswith("POLICY_B64="))
    end = next(i for i in range(start, len(setup)) if setup[i] == "fi")
    subprocess.run(["bash", "-euc", "\n".join(setup[start : end + 1])], check=True)
    assert target.read_text() == POLICY


# --- MIG mode at boot --------------------------------------------------------------------------------

FAKE_SMI = r"""#!/bin/bash
# nvidia-smi stand-in: per-GPU current/pending MIG mode in $SMI_STATE/<i>.{cur,pend}; calls logged.
echo "$*" >> "$SMI_STATE/calls"
case "$*" in
  --query-gpu=*) for g in 0 1; do echo "$g, $(cat $SMI_STATE/$g.cur), $(cat $SMI_STATE/$g.pend)"; done ;;
  "-i "?" -mig 1") echo Enabled > "$SMI_STATE/$2.pend" ;;
  "-i "?" --gpu-reset") [ "$RESET_WORKS" = 1 ] && cp "$SMI_STATE/$2.pend" "$SMI_STATE/$2.cur"; [ "$RESET_WORKS" = 1 ] ;;
esac
"""


def _run_mig_mode(fleet: dict[str, Any], tmp_path: Path, mig: str, reset_works: bool) -> tuple[int, list[str], Path]:
    rendered = cloud_config(render_template(NODE_TEMPLATE.read_text(), node_vars(fleet) | {"mig": mig}))
    script = tmp_path / "igniter-mig-mode"
    script.write_text(files(rendered)["/usr/local/sbin/igniter-mig-mode"])
    bash_syntax_ok(script.read_text(), tmp_path)
    bin_dir, state = tmp_path / "bin", tmp_path / "smi"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in (("nvidia-smi", FAKE_SMI), ("systemctl", 'echo "systemctl $*" >> "$SMI_STATE/calls"\n')):
        (bin_dir / name).write_text(body if body.startswith("#!") else "#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    for gpu in (0, 1):
        (state / f"{gpu}.cur").write_text("Disabled\n")
        (state / f"{gpu}.pend").write_text("Disabled\n")
    env_file = tmp_path / "node.env"
    env_file.write_text(files(rendered)["/etc/igniter/node.env"])
    done = subprocess.run(
        ["bash", "-c", f"set -a; . {env_file}; set +a; exec bash {script}"],
        env={
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "SMI_STATE": str(state),
            "RESET_WORKS": "1" if reset_works else "0",
            "IGNITER_MIG_MARKER": str(tmp_path / "marker"),
        },
        capture_output=True,
        text=True,
    )
    calls = (state / "calls").read_text().splitlines() if (state / "calls").exists() else []
    return done.returncode, calls, tmp_path / "marker"


@pytest.mark.e2e
def test_a_mig_type_turns_mig_mode_on_and_resets_before_the_agent(fleet: dict[str, Any], tmp_path: Path) -> None:
    code, calls, marker = _run_mig_mode(fleet, tmp_path, "true", reset_works=True)
    assert code == 0
    sets = [c for c in calls if c.endswith("-mig 1")]
    resets = [c for c in calls if c.endswith("--gpu-reset")]
    assert sets == ["-i 0 -mig 1", "-i 1 -mig 1"] and resets == ["-i 0 --gpu-reset", "-i 1 --gpu-reset"]
    assert calls.index(sets[-1]) < calls.index(resets[0]) and not marker.exists()
    assert not any("reboot" in c for c in calls)


@pytest.mark.e2e
def test_a_gpu_the_reset_cannot_switch_gets_one_reboot_then_an_error(fleet: dict[str, Any], tmp_path: Path) -> None:
    code, calls, marker = _run_mig_mode(fleet, tmp_path, "true", reset_works=False)
    assert code == 0 and marker.exists() and calls[-1] == "systemctl --no-block reboot"


@pytest.mark.e2e
def test_other_types_leave_mig_mode_alone(fleet: dict[str, Any], tmp_path: Path) -> None:
    code, calls, _ = _run_mig_mode(fleet, tmp_path, "false", reset_works=True)
    assert code == 0 and calls == []


@pytest.mark.unit
def test_mig_instance_types_are_the_mig_capable_ones(fleet: dict[str, Any]) -> None:
    variable = fleet["variable"]["mig_instance_types"]
    assert variable["default"] == []
    for capable in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"):
        assert capable in str(variable["validation"])
    assert "contains(var.mig_instance_types, type)" in fleet["locals"]["node_user_data"]
