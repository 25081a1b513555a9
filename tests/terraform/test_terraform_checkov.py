"""checkov passes on terraform/: no failed check, every skip with a reason, the key resources scanned.

checkov runs once for this module (about 5-60 s). It is a dev dependency installed by `make test` in
its own venv (.venv-tools, because it pins boto3); this test fails, never skips, when it is missing.
The run is `checkov -d terraform --framework terraform --compact -o json --skip-download`: the same
scan as `--quiet --compact` (docs/deploy.md), minus --quiet, because --quiet drops the passed and
skipped entries from the JSON and this test reads them. --skip-download keeps it offline.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.terraform.tfhelpers import ROOT, TF_DIR, checkov_path

# the module's tests share one costly module-scoped fixture: under --dist loadgroup they run on one worker
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("test_terraform_checkov")]


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    checkov = checkov_path()
    if not checkov.exists():
        pytest.fail(
            f"checkov not found at {checkov}: run `make tools` (or set CHECKOV=/path/to/checkov)", pytrace=False
        )
    result = subprocess.run(
        [str(checkov), "-d", str(TF_DIR), "--framework", "terraform", "--compact", "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.stdout.strip(), f"checkov printed no report (exit {result.returncode}):\n{result.stderr[-4000:]}"
    data = json.loads(result.stdout)
    reports = data if isinstance(data, list) else [data]
    (terraform,) = [r for r in reports if r.get("check_type") == "terraform"]
    return terraform


def test_no_failed_checks(report: dict[str, Any]) -> None:
    failed = [
        f"{c['check_id']} {c['resource']} ({c['file_path']}:{c['file_line_range']})"
        for c in report["results"]["failed_checks"]
    ]
    assert report["summary"]["failed"] == 0 and not failed, "\n".join(failed)


def test_no_parsing_errors_and_a_real_scan(report: dict[str, Any]) -> None:
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] >= 150, report["summary"]
    assert report["summary"]["resource_count"] >= 40, report["summary"]


def test_every_skip_has_a_written_reason(report: dict[str, Any]) -> None:
    skipped = report["results"]["skipped_checks"]
    reasons = {(c["check_id"], c["resource"]): c["check_result"].get("suppress_comment", "") for c in skipped}
    assert report["summary"]["skipped"] == len(skipped)
    assert all(len(reason) >= 40 for reason in reasons.values()), reasons


def test_only_the_reviewed_skips(report: dict[str, Any]) -> None:
    """New skips need review: extend this list only with a reason in the code next to the resource."""
    reviewed = {
        ("CKV_AWS_109", "aws_iam_policy_document.logs_key"),
        ("CKV_AWS_111", "aws_iam_policy_document.logs_key"),
        ("CKV_AWS_356", "aws_iam_policy_document.logs_key"),
        ("CKV_AWS_109", "aws_iam_policy_document.ssh_key_kms"),
        ("CKV_AWS_111", "aws_iam_policy_document.ssh_key_kms"),
        ("CKV_AWS_356", "aws_iam_policy_document.ssh_key_kms"),
        ("CKV_AWS_109", "aws_iam_policy_document.interruptions_key"),  # the same standard key policy
        ("CKV_AWS_111", "aws_iam_policy_document.interruptions_key"),
        ("CKV_AWS_356", "aws_iam_policy_document.interruptions_key"),
        ("CKV2_AWS_57", "aws_secretsmanager_secret.ssh_key"),
        ("CKV_AWS_119", "aws_dynamodb_table.leader"),
        ("CKV2_AWS_20", "aws_lb.gateway"),
    }
    found = {
        (c["check_id"], c["resource"].split(".", 2)[-1].split("[")[0]) for c in report["results"]["skipped_checks"]
    }
    assert found <= reviewed, found - reviewed


@pytest.mark.parametrize(
    ("check_id", "resource"),
    [
        ("CKV_AWS_79", "module.fleet.aws_launch_template.node"),  # IMDSv1 off
        ("CKV_AWS_341", "module.fleet.aws_launch_template.node"),  # metadata hop limit 1
        ("CKV_AWS_46", "module.fleet.aws_launch_template.node"),  # no secrets in user data
        ("CKV_AWS_79", "module.autoscaler.aws_instance.host"),
        ("CKV_AWS_8", "module.autoscaler.aws_instance.host"),  # encrypted EBS
        ("CKV_AWS_88", "module.autoscaler.aws_instance.host"),  # no public IP
        ("CKV_AWS_126", "module.autoscaler.aws_instance.host"),  # detailed monitoring
        ("CKV_AWS_24", "module.fleet.aws_vpc_security_group_ingress_rule.from_cidr"),  # no 0.0.0.0/0 to 22
        ("CKV_AWS_277", "module.fleet.aws_security_group.node"),
        ("CKV_AWS_111", "module.autoscaler.aws_iam_policy_document.autoscaler"),  # write access constrained
        ("CKV_AWS_356", "module.autoscaler.aws_iam_policy_document.autoscaler"),
        ("CKV_AWS_110", "module.autoscaler.aws_iam_policy_document.autoscaler"),  # no privilege escalation
        ("CKV2_AWS_11", "module.fleet.aws_vpc.this"),  # flow logs
        ("CKV2_AWS_12", "module.fleet.aws_vpc.this"),  # default security group closed
        ("CKV_AWS_158", "module.fleet.aws_cloudwatch_log_group.flow"),
        ("CKV_AWS_7", "module.autoscaler.aws_kms_key.ssh_key"),
        ("CKV_AWS_149", "module.autoscaler.aws_secretsmanager_secret.ssh_key"),
        ("CKV_AWS_28", "module.autoscaler.aws_dynamodb_table.leader"),  # point-in-time recovery
        ("CKV2_AWS_16", "module.autoscaler.aws_dynamodb_table.leader"),  # on demand: scales by itself
    ],
)
def test_security_checks_were_evaluated_and_passed(report: dict[str, Any], check_id: str, resource: str) -> None:
    """Guards against a scan that silently skips resources (checkov drops count-ed resources it cannot evaluate)."""
    passed = {(c["check_id"], c["resource"].split("[")[0]) for c in report["results"]["passed_checks"]}
    assert (check_id, resource) in passed
