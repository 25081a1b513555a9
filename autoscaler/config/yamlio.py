"""Read YAML documents with errors that name the file and the line.

A key given twice in one mapping is an error: PyYAML would silently keep the last value, and for a
key like `fleet` (which decides the instances that are ours) the first one is as likely meant.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from autoscaler.config.errors import InputError
from autoscaler.config.limits import MAX_DEPTH, MAX_INT_DIGITS


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

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Refuse nesting past MAX_DEPTH before the recursive composer reaches Python's limit."""
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise PastCeiling(None, None, f"nested more than {MAX_DEPTH} deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An integer of more than MAX_INT_DIGITS digits is an error here, at its line: Python's own
        limit (4,300 digits) would raise a bare ValueError, and no field of ours holds one."""
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise PastCeiling(
                None, None, f"an integer of {digits:,} digits (at most {MAX_INT_DIGITS})", node.start_mark
            )
        value: int = super().construct_yaml_int(node)
        return value


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
# YAML 1.1 reads `1e3` and `1.5e3` (an exponent without its sign) as strings; YAML 1.2 and every user mean a
# number. Numbers are strict (config/fields.py), so it must be one here.
_UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


class PastCeiling(yaml.MarkedYAMLError):  # type: ignore[misc]
    """Input past a structural ceiling (nesting depth, integer length); `problem_mark` says where."""


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
    except (DuplicateKey, PastCeiling) as exc:
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
