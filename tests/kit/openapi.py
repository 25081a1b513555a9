"""Validate a status-endpoint answer against the OpenAPI description the endpoint serves."""

from __future__ import annotations

from typing import Any

from openapi_schema_validator import OAS31Validator


def response_schema(doc: dict[str, Any], path: str, code: str = "200") -> dict[str, Any]:
    """The JSON schema of one path's GET answer, with the document's components for its $refs."""
    schema = doc["paths"][path]["get"]["responses"][code]["content"]["application/json"]["schema"]
    return {**schema, "components": doc["components"]}


def check(doc: dict[str, Any], path: str, body: Any, code: str = "200") -> None:
    """Raise jsonschema's ValidationError (naming the field) when `body` breaks the description."""
    OAS31Validator(response_schema(doc, path, code)).validate(body)
