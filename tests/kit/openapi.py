"""Validate a status-endpoint answer against the OpenAPI description the endpoint serves."""

from __future__ import annotations

from typing import Any

from openapi_schema_validator import OAS31Validator


def response_schema(
    doc: dict[str, Any], path: str, code: str = "200", media: str = "application/json"
) -> dict[str, Any]:
    """The JSON schema of one path's GET answer, with the document's components for its $refs."""
    schema = doc["paths"][path]["get"]["responses"][code]["content"][media]["schema"]
    return {**schema, "components": doc["components"]}


def check(doc: dict[str, Any], path: str, body: Any, code: str = "200", media: str = "application/json") -> None:
    """Raise jsonschema's ValidationError (naming the field) when `body` breaks the description."""
    OAS31Validator(response_schema(doc, path, code, media)).validate(body)


def check_response(doc: dict[str, Any], path: str, response: Any) -> None:
    """An httpx response against the document: its status code and media type are documented for
    `path` (the route's template, e.g. /readyz/{check}), and its body matches that schema."""
    media = response.headers["content-type"].split(";")[0]
    body = response.json() if media == "application/json" else response.text
    check(doc, path, body, str(response.status_code), media)
