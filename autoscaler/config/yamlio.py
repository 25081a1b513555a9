"""Read YAML documents with errors that name the file and the line.

A key given twice in one mapping is an error: PyYAML would silently keep the last value, and for a
key like `fleet` (which decides the instances that are ours) the first one is as likely meant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.errors import InputError


class DuplicateKey(yaml.MarkedYAMLError):  # type: ignore[misc]  # PyYAML ships no types
    """A mapping names one key twice; `problem_mark` points at the second one."""


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader that refuses duplicate keys (merge keys `<<:` still override, as YAML means)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
                seen.setdefault(key, key_node.start_mark.line)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first is not None:
                raise DuplicateKey(
                    None, None, f"duplicate key {key!r} (first on line {first + 1})", key_node.start_mark
                )
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def load_yaml(text: str) -> Any:
    """Parse YAML safely, refusing duplicate keys; raises yaml.YAMLError (marked with the line)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)


def load_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping; syntax errors and duplicate keys carry the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"cannot read: {exc}") from None
    try:
        data = load_yaml(text)
    except DuplicateKey as exc:
        raise InputError(path, f"line {exc.problem_mark.line + 1}", str(exc.problem)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "syntax"
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(path, line, f"YAML syntax error: {problem}") from None
    if data is None:
        raise InputError(path, "", "file is empty")
    if not isinstance(data, dict):
        raise InputError(path, "", f"expected a mapping at the top level, got {type(data).__name__}")
    return data
