"""JSON the agent accepts from outside: UTF-8, bounded size and nesting, no duplicate keys.

The standard parser takes the last of two equal keys silently and recurses once per nesting level
(so 100k-deep input raises RecursionError, not a syntax error). One linear pass over the tokens
first refuses deep nesting and finds duplicate keys with their path and line; only then does
json.loads run, on input that cannot blow its stack. Every refusal is an InputError naming the
file and the line or field, which the CLI prints with exit 2.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.errors import InputError

MAX_DEPTH = 32
MAX_BYTES = 4 * 2**20
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]')


@dataclass
class _Frame:
    """One open object (keys seen, with their lines) or array (the index of the current item)."""

    is_object: bool
    keys: dict[str, int] = field(default_factory=dict)
    key: str | None = None
    index: int = 0


@dataclass(frozen=True)
class _Duplicate:
    path: str
    line: int
    first_line: int


def decode_utf8(data: bytes, source: str | Path) -> str:
    """Bytes -> text, refusing anything that is not UTF-8 with the line and byte where it breaks."""
    if len(data) > MAX_BYTES:
        raise InputError(source, "", f"{len(data)} bytes is more than the {MAX_BYTES} an assignment may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(
            source, f"line {line}", f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def loads(text: str, source: str | Path, max_depth: int = MAX_DEPTH) -> Any:
    """Parse after the structural checks; syntax errors, then duplicates, are InputErrors."""
    duplicate = _scan(text, source, max_depth)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise InputError(source, "", f"invalid JSON: {exc}") from None
    if duplicate is not None:
        raise InputError(
            source,
            duplicate.path,
            f"duplicate key on line {duplicate.line} (first on line {duplicate.first_line})",
        )
    return data


def _scan(text: str, source: str | Path, max_depth: int) -> _Duplicate | None:
    """Refuse nesting deeper than max_depth at once; return the first duplicate key, if any."""
    stack: list[_Frame] = []
    line, seen_upto = 1, 0
    previous: re.Match[str] | None = None
    duplicate: _Duplicate | None = None
    for match in _TOKEN.finditer(text):
        line += text.count("\n", seen_upto, match.start())
        seen_upto = match.start()
        token = match.group()
        if token in "{[":
            if len(stack) >= max_depth:
                raise InputError(source, f"line {line}", f"JSON nested deeper than {max_depth} levels")
            stack.append(_Frame(is_object=token == "{"))
        elif token in "}]":
            if stack:
                stack.pop()
        elif token == ",":
            if stack:
                stack[-1].index += 1
        elif token == ":" and stack and previous is not None and previous.group().startswith('"'):
            duplicate = duplicate or _note_key(stack, _string(previous.group()), line)
        previous = match
    return duplicate


def _string(token: str) -> str:
    """A key's text; a malformed one stays raw (json.loads reports the syntax error afterwards)."""
    try:
        return str(json.loads(token))
    except ValueError:
        return token


def _note_key(stack: list[_Frame], key: str, line: int) -> _Duplicate | None:
    """Record a key in the innermost object; a key it already holds is a duplicate."""
    frame = stack[-1]
    frame.key = key
    if key in frame.keys:
        return _Duplicate(_path(stack), line, frame.keys[key])
    frame.keys[key] = line
    return None


def _path(stack: list[_Frame]) -> str:
    """`servers[0].port` from the open objects' current keys and the arrays' indices."""
    out = ""
    for frame in stack:
        if not frame.is_object:
            out += f"[{frame.index}]"
        elif frame.key is not None:
            out += f".{frame.key}" if out else frame.key
    return out
