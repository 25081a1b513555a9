"""Helpers for the Terraform tests: parse HCL with python-hcl2, render .tftpl user data, find tools.

Terraform itself cannot plan or apply here (its providers cannot be downloaded), so these tests read
the configuration statically. Where the `terraform` binary happens to be installed, a few tests also
ask it to format-check files, evaluate variable validations and render templates with `terraform
console` in a scratch directory that declares no provider; none of that is a plan or an apply.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import hcl2

ROOT = Path(__file__).resolve().parents[2]
TF_DIR = ROOT / "terraform"
FLEET_DIR = TF_DIR / "modules" / "fleet"
AUTOSCALER_DIR = TF_DIR / "modules" / "autoscaler"
GATEWAY_DIR = TF_DIR / "modules" / "gateway"
EXAMPLE_DIR = TF_DIR / "examples" / "basic"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

FLEET_TAG = "igniter:fleet"
DEFAULT_INSTANCE_TYPES = ["g4dn.xlarge", "g4dn.12xlarge", "p3.2xlarge", "p3.8xlarge", "g5.xlarge"]

BLOCK_KINDS = ("resource", "data")


def _options() -> Any:
    """python-hcl2 >= 7 keeps quotes and block markers unless told otherwise; older versions strip them."""
    try:
        from hcl2.utils import SerializationOptions
    except ImportError:
        return None
    return SerializationOptions(strip_string_quotes=True, explicit_blocks=False, with_comments=False)


def load_hcl(path: Path) -> dict[str, Any]:
    """Parse one .tf file into python-hcl2's dict form (string values unquoted)."""
    options = _options()
    with path.open() as handle:
        if options is None:
            return hcl2.load(handle)
        return hcl2.load(handle, serialization_options=options)


def load_config(directory: Path) -> dict[str, Any]:
    """Merge every .tf file of one module directory into {kind: {...}} maps.

    resource/data: {type: {name: body}}; variable/output/module: {name: body}; locals: {name: expr}.
    """
    merged: dict[str, Any] = {"resource": {}, "data": {}, "variable": {}, "output": {}, "module": {}, "locals": {}}
    for path in sorted(directory.glob("*.tf")):
        parsed = load_hcl(path)
        for kind in BLOCK_KINDS:
            for block in parsed.get(kind, []):
                for rtype, named in block.items():
                    merged[kind].setdefault(rtype, {}).update(named)
        for kind in ("variable", "output", "module"):
            for block in parsed.get(kind, []):
                merged[kind].update(block)
        for block in parsed.get("locals", []):
            merged["locals"].update(block)
    return merged


def unwrap(value: Any) -> Any:
    """`${expr}` -> `expr` for a value that is one whole interpolation; anything else unchanged."""
    if isinstance(value, str) and value.startswith("${") and value.endswith("}") and value.count("${") == 1:
        return value[2:-1]
    return value


def blocks(value: Any) -> list[dict[str, Any]]:
    """A nested block as a list of bodies, whichever way the parser shaped it."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def tf_files() -> list[Path]:
    return sorted(TF_DIR.rglob("*.tf"))


# --- .tftpl rendering ----------------------------------------------------------------------------

# Terraform template syntax: ${name} interpolates, $${ and %%{ escape, %{ starts a directive. The
# templates in this repository use plain ${name} placeholders only, so this renderer is exact for
# them and refuses anything else (which test_user_data asserts).
_TOKEN = re.compile(r"\$\$\{|%%\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{|%\{")


def template_placeholders(text: str) -> set[str]:
    return {m.group(1) for m in _TOKEN.finditer(text) if m.group(1)}


def render_template(text: str, variables: dict[str, Any]) -> str:
    """Render a .tftpl the way Terraform's templatefile() does, for plain ${name} placeholders."""

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        if token == "%%{":
            return "%{"
        name = match.group(1)
        if name is None:
            raise ValueError(f"unsupported template syntax {token!r} at offset {match.start()}")
        if name not in variables:
            raise KeyError(f"template variable {name!r} not given")
        value = variables[name]
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    return _TOKEN.sub(replace, text)


def templatefile_call_keys(tf_text: str, template_name: str) -> set[str]:
    """The keys of the object passed to templatefile(".../<template_name>", {...}) in tf_text."""
    start = tf_text.index(template_name)
    open_brace = tf_text.index("{", start)
    depth, end = 0, open_brace
    for end in range(open_brace, len(tf_text)):
        depth += {"{": 1, "}": -1}.get(tf_text[end], 0)
        if depth == 0:
            break
    body = tf_text[open_brace + 1 : end]
    return set(re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=", body, flags=re.MULTILINE))


# --- tools ----------------------------------------------------------------------------------------


def terraform_bin() -> str | None:
    return shutil.which("terraform")


def terraform_env() -> dict[str, str]:
    return {**os.environ, "TF_CLI_CONFIG_FILE": os.devnull, "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1"}


def terraform_console(
    workdir: Path, expression: str, variables: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Evaluate one expression with `terraform console` in workdir (which must declare no provider)."""
    binary = terraform_bin()
    assert binary is not None
    args = [binary, "console", "-no-color"]
    for name, value in (variables or {}).items():
        args += ["-var", f"{name}={value}"]
    return subprocess.run(
        args, cwd=workdir, input=expression + "\n", capture_output=True, text=True, timeout=120, env=terraform_env()
    )


def terraform_string(workdir: Path, expression: str) -> str:
    """A string expression's value, via base64 so quoting and newlines survive the console."""
    result = terraform_console(workdir, f"base64encode({expression})")
    assert result.returncode == 0 and "Error" not in result.stderr, result.stderr
    return base64.b64decode(result.stdout.strip().strip('"')).decode()


def checkov_path() -> Path:
    """$CHECKOV (set by `make test`), else the tools venv next to the project venv."""
    env = os.environ.get("CHECKOV")
    return Path(env) if env else ROOT / ".venv-tools" / "bin" / "checkov"
