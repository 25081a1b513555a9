"""The OpenAPI 3.1 description of the status endpoint, served at /openapi.json.

Written by hand rather than generated: the views are snapshots (dicts) built by the loop, not
typed models, and the description is what an operator's client is written against. Every
documented field is required and typed; objects stay open (`additionalProperties` allowed) so a
field added to a view does not break existing clients. tests/loop/test_openapi.py validates real
responses of a ticking controller against it, so a renamed or retyped field fails there.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from autoscaler.core.capacity import error_window
from autoscaler.loop.status.health import STATUSES
from autoscaler.loop.tick.advisory import ADVICE_KINDS

NUM = {"type": "number"}
INT = {"type": "integer"}
STR = {"type": "string"}
BOOL = {"type": "boolean"}
NUM_OR_NULL = {"type": ["number", "null"]}
INT_OR_NULL = {"type": ["integer", "null"]}
STR_OR_NULL = {"type": ["string", "null"]}
STRS = {"type": "array", "items": STR}
NULL = {"type": "null"}
EMPTY = {"type": "array", "maxItems": 0}
NONE = {"type": "object", "maxProperties": 0}
FIRST = "Before the first tick."


def obj(description: str = "", **props: Any) -> dict[str, Any]:
    """An object whose every listed property is required."""
    out: dict[str, Any] = {"type": "object", "properties": props, "required": sorted(props)}
    if description:
        out["description"] = description
    return out


def map_of(values: dict[str, Any], description: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "additionalProperties": values}
    if description:
        out["description"] = description
    return out


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def exact(description: str, **props: Any) -> dict[str, Any]:
    """A placeholder view (before the first tick, or on a standby): exactly these fields."""
    return {**obj(description, **props), "additionalProperties": False}


def standby(**props: Any) -> dict[str, Any]:
    """What a view is while this process stands by (it plans nothing)."""
    return exact("On a standby: it plans nothing.", role={"const": "standby"}, **props)


SERVER = obj(
    "One planned inference server (core/layout.py PlannedServer).",
    name=STR,
    workload=STR,
    model=STR,
    gpu_index=INT,
    index=INT,
    batch=INT,
    mps_percent=NUM,
    rate_rps=NUM,
    predicted_latency_ms=NUM,
    predicted_throughput_rps=NUM,
    model_dir=STR,
    max_queue_delay_ms=NUM,
    replaces=STR,
    address=STR,
)
LAYOUT = obj(
    "The plan given stable names: each planned instance a slot, each placement a named server.",
    planner=STR,
    cost_per_hour=NUM,
    rates=map_of(NUM),
    slots={
        "type": "array",
        "items": obj(
            slot=STR,
            instance_type=STR,
            capacity_type={"enum": ["on-demand", "spot"]},
            price_per_hour=NUM,
            gpus=STRS,
            servers={"type": "array", "items": ref("PlannedServer")},
        ),
    },
    unplaced={"type": "array", "items": obj(workload=STR, reason=STR)},
)
PLAN = obj(
    "The last tick's decision, its layout and the rates behind it.",
    tick=INT,
    decision=STR,
    layout={"oneOf": [ref("Layout"), NULL]},
    forecast=map_of(NUM, "Rate planned for per workload (forecast with headroom), req/s"),
    observed=map_of(NUM, "Latest usable observed rate per workload, req/s"),
    missing=STRS,
    corrections=map_of(NUM, "SLO-guard correction factor per workload"),
    headroom=map_of(NUM),
    attainment_1h=map_of(NUM_OR_NULL),
    notes=STRS,
    draining=STRS,
    breaches={"type": "array", "items": {"type": "object"}},
    converged=BOOL,
    surge_slots=STRS,
    ok=BOOL,
    error=STR_OR_NULL,
)
INSTANCE = obj(
    "One open instance record and the servers its agent was told to run.",
    slot=STR,
    attempt=INT,
    instance_type=STR,
    capacity_type=STR,
    state=STR,
    instance_id=STR_OR_NULL,
    created_at=NUM,
    updated_at=NUM,
    leaves_at=NUM_OR_NULL,
    servers=STRS,
    mig={
        "type": ["object", "null"],
        "description": "Its agent's MIG status (igniter-agent status --json `mig`: device, errors, each GPU's "
        "mig_mode and slices); null where MIG is off or the agent did not answer.",
    },
)
FLEET = obj(
    "Open instance records, the fleet's hourly cost and what holds parts of it back.",
    fleet=STR,
    cost_per_hour=NUM,
    instances={"type": "array", "items": ref("Instance")},
    unavailable=map_of(NUM, "Instance offerings found without capacity, until when (epoch s)"),
    quarantined=map_of({"type": "object"}),
    backoff={"type": ["object", "null"]},
    transitions={"type": "array", "items": {"type": "array", "items": STR, "minItems": 3, "maxItems": 3}},
)
FLEET["properties"]["page"] = obj(  # only with ?limit= or ?after= (loop/status/paging.py); not required
    "The page shown: its limit and cursor, the cursor of the next page (null: this is the last), and how many "
    "records the whole view holds.",
    limit={"type": ["integer", "null"]},
    after=STR_OR_NULL,
    next_after=STR_OR_NULL,
    total={"type": "integer"},
)
FLEET_PARAMETERS = [
    {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "At most this many instances (1 to 5000), in record order (slot, attempt).",
        "schema": {"type": "integer", "minimum": 1, "maximum": 5000},
    },
    {
        "name": "after",
        "in": "query",
        "required": False,
        "description": "The instances after this cursor (SLOT#ATTEMPT: the previous page's page.next_after).",
        "schema": STR,
    },
]
LEADER = obj(
    "The fleet's lease as this process sees it.",
    role={"enum": ["leader", "standby", "advisory"]},
    kind=STR,
    owner=STR,
    holder=STR,
    token=INT_OR_NULL,
    lease_s=NUM_OR_NULL,
    note=STR_OR_NULL,
)
HEADROOM = obj(
    "Per workload: the headroom planned with and the attainment it was sized for.",
    mode={"enum": ["auto", "fixed"]},
    target_attainment=NUM,
    workloads=map_of(
        obj(
            headroom=NUM,
            burst_floor_rps=NUM,
            ramp_floor_rps=NUM,
            quantile=NUM_OR_NULL,
            forecast_error=NUM_OR_NULL,
            forecast_error_1h={
                "type": "object",
                "description": "Quantiles of the last hour's forecast errors "
                "(observed / the base forecast boot_s earlier - 1), time-weighted; {} before the first",
                "propertyNames": {"enum": [error_window.label(q) for q in error_window.QUANTILES]},
                "additionalProperties": NUM,
            },
            attainment_1h=NUM_OR_NULL,
            periods_s={"type": "array", "items": NUM},
            ahead_rps=NUM,
        )
    ),
)
GATEWAY_SERVER = obj(
    name=STR,
    address=STR,
    state=STR,
    weight=INT,
    planned_rate_rps=NUM_OR_NULL,
    requests_total=INT,
    current_sessions=INT,
    status=STR,
    check_ok=BOOL,
    errors_5xx=INT,
    retiring=BOOL,
    drain_since=NUM_OR_NULL,
)
GATEWAY = obj(
    "The data plane per workload: its servers with their weights, and the measured rate.",
    kind=STR,
    listen=STR,
    hosts=STRS,
    ok=BOOL,
    error=STR_OR_NULL,
    observed_at=NUM_OR_NULL,
    workloads=map_of(
        obj(
            request_rate_rps=NUM_OR_NULL,
            requests_total=INT_OR_NULL,
            errors_5xx=INT_OR_NULL,
            current_sessions=INT_OR_NULL,
            servers={"type": "array", "items": ref("GatewayServer")},
        )
    ),
)
ADVICE = obj(
    "igniter run --advisory: what the last tick would have done (none of it was done).",
    mode={"const": "advisory"},
    tick=INT,
    at=NUM,
    decision=STR,
    cost_per_hour=NUM_OR_NULL,
    counts=map_of(INT),
    actions={
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"action": {"enum": list(ADVICE_KINDS)}},
            "required": ["action"],
        },
    },
    ok=BOOL,
    error=STR_OR_NULL,
)
ERROR = obj("Every error is JSON.", error=STR)
CHECK = {
    **obj("One health check (loop/status/health.py).", ok=BOOL, reasons=STRS),
    "properties": {"ok": BOOL, "reasons": STRS, "note": {**STR, "description": "Why it passed without looking."}},
}
HEALTH = obj(
    "The fleet's health: 200 for everything but failing (503), the load-balancer contract "
    "(docs/operations.md); /readyz is the strict one.",
    status={"enum": list(STATUSES)},
    reasons=STRS,
    checks=map_of(ref("Check")),
    last_error=STR_OR_NULL,
    leader=ref("Leader"),
)
# kube-apiserver's text answers: `ok`, or one `[+]name ok` / `[-]name failed: reasons` line per
# check and a verdict (?verbose, and always on a failure).
PROBE_TEXT = {
    "type": "string",
    "pattern": r"^(ok|(\[[+-]\][\w-]+ [^\n]*\n)+(livez|readyz) check (passed|failed))\n$",
}

SCHEMAS: dict[str, Any] = {
    "PlannedServer": SERVER,
    "Layout": LAYOUT,
    "Plan": {"oneOf": [PLAN, exact(FIRST, layout=NULL), standby(layout=NULL)]},
    "Instance": INSTANCE,
    "Fleet": {"oneOf": [FLEET, exact(FIRST, instances=EMPTY), standby(instances=EMPTY)]},
    "Leader": LEADER,
    "Headroom": {"oneOf": [HEADROOM, exact(FIRST, workloads=NONE), standby(workloads=NONE)]},
    "GatewayServer": GATEWAY_SERVER,
    "Gateway": {"oneOf": [GATEWAY, exact("No gateway, or before the first tick.", kind=STR, workloads=NONE)]},
    "Advice": {"oneOf": [ADVICE, exact("Not an advisory run.", mode={"const": "off"}, actions=EMPTY)]},
    "Error": ERROR,
    "Check": CHECK,
    "Health": HEALTH,
}
VIEWS = {
    "/v1/plan": ("Plan", "The last tick's plan"),
    "/v1/fleet": ("Fleet", "The fleet's instances and cost"),
    "/v1/leader": ("Leader", "The fleet's lease"),
    "/v1/headroom": ("Headroom", "Headroom and attainment per workload"),
    "/v1/gateway": ("Gateway", "The gateway's servers and weights"),
    "/v1/advice": ("Advice", "What an advisory run would do"),
}


def _get(summary: str, schema: str) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "security": [{"bearer": []}],
            "responses": {
                "200": {"description": summary, "content": {"application/json": {"schema": ref(schema)}}},
                "401": {
                    "description": "No or a wrong bearer token (with scaling.status_token_file)",
                    "content": {"application/json": {"schema": ref("Error")}},
                },
            },
        }
    }


def _paged(schema: str, summary: str) -> dict[str, Any]:
    """/v1/fleet: a view that also answers a page at a time (loop/status/paging.py)."""
    out = _get(f"{summary} (whole, or a page with limit and after)", schema)
    out["get"]["parameters"] = FLEET_PARAMETERS
    out["get"]["responses"]["400"] = {
        "description": "A limit or after that is not one (the error names it)",
        "content": {"application/json": {"schema": ref("Error")}},
    }
    return out


def _healthz() -> dict[str, Any]:
    body = {"content": {"application/json": {"schema": ref("Health")}}}
    return {
        "get": {
            "summary": "The fleet's health (open: no token)",
            "security": [],
            "responses": {
                "200": {"description": "ok, degraded (with reasons), standby or starting", **body},
                "503": {"description": "failing: the last tick failed", **body},
            },
        }
    }


PROBE_PARAMETERS = [
    {
        "name": "verbose",
        "in": "query",
        "required": False,
        "allowEmptyValue": True,
        "description": "One line per check and a verdict, also when every check passes.",
        "schema": STR,
    },
    {
        "name": "exclude",
        "in": "query",
        "required": False,
        "description": "A check to leave out (repeatable).",
        "schema": {"type": "array", "items": STR},
        "explode": True,
    },
]


def _probe(kind: str, one: bool) -> dict[str, Any]:
    """/livez, /readyz (and /NAME of one check): kube-apiserver's text format."""
    text = {"content": {"text/plain": {"schema": PROBE_TEXT}}}
    what = "liveness: the process ticks" if kind == "livez" else "readiness: every check of /healthz passes"
    responses = {"200": {"description": "passed", **text}, "503": {"description": "a check failed", **text}}
    parameters = list(PROBE_PARAMETERS)
    if one:
        parameters.append({"name": "check", "in": "path", "required": True, "schema": STR})
        responses["404"] = {"description": "no such check", "content": {"text/plain": {"schema": STR}}}
    summary = f"{'One check of ' if one else ''}{what} (open: no token)"
    return {"get": {"summary": summary, "security": [], "parameters": parameters, "responses": responses}}


PROBES = {
    "/healthz": _healthz(),
    **{f"/{kind}": _probe(kind, False) for kind in ("livez", "readyz")},
    **{f"/{kind}/{{check}}": _probe(kind, True) for kind in ("livez", "readyz")},
}


@cache
def _document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "igniter status endpoint",
            "version": "1",
            "description": "Read-only views of the autoscaler (docs/operations.md, 'The status endpoint'): "
            "the health probes, and /v1/*, each the snapshot published after the latest tick.",
        },
        "paths": {**PROBES, **{path: _get(summary, schema) for path, (schema, summary) in VIEWS.items()}}
        | {"/v1/fleet": _paged(*VIEWS["/v1/fleet"])},
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def openapi() -> dict[str, Any]:
    """A fresh copy of the document (callers may annotate it)."""
    return copy.deepcopy(_document())
