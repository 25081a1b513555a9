"""Write the policy JSON schema: `python -m autoscaler.config.schema [OUT]` (default policies/policy.schema.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from autoscaler.config.policy import policy_json_schema

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "policies" / "policy.schema.json"


def render() -> str:
    return json.dumps(policy_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    out.write_text(render(), encoding="utf-8")
    print(f"wrote {out}")
