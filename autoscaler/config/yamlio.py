"""Read YAML documents with errors that name the file and the line.

A key given twice in one mapping is an error: PyYAML would silently keep the last value, and for a
key like `fleet` (which decides the instances that are ours) the first one is as likely meant.
Large machine-written files (profiles) may ask for libyaml's parser (`fast`); what they get back,
and any error, is what the Python loader gives.
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


class _Checked(yaml.constructor.SafeConstructor):  # type: ignore[misc]
    """The constructor's checks, shared by both loaders: a key given twice in one mapping is an
    error (merge keys `<<:` still override, as YAML means), and so is an integer too long to be
    one of ours."""

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


class _UniqueKeyLoader(_Checked, yaml.SafeLoader):  # type: ignore[misc]
    """SafeLoader with the checks (_Checked), refusing nesting past MAX_DEPTH: every document's
    reader, and the one whose errors are shown (their words name what is wrong: libyaml's often
    do not)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        """Refuse nesting past MAX_DEPTH before the recursive composer reaches Python's limit."""
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise PastCeiling(None, None, f"nested more than {MAX_DEPTH} deep", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


# libyaml's parser (PyYAML's C extension, where it was built with it) with the same constructor
# checks and resolvers: a 150 KB imported MIG profile took 0.61 s through _UniqueKeyLoader and
# 0.12 s here, the depth scan of its events included (igniter plan, simulate and run read one at
# start, the tests hundreds of times).
_CSafeLoader: Any = getattr(yaml, "CSafeLoader", None)


class _FastLoader(_Checked, _CSafeLoader or yaml.SafeLoader):  # type: ignore[misc]
    """_UniqueKeyLoader's checks on libyaml's parser; depth is checked on its events beforehand
    (`_shallow`: its composer is recursive C)."""


for _loader in (_UniqueKeyLoader, _FastLoader):
    _loader.add_constructor("tag:yaml.org,2002:int", _Checked.construct_yaml_int)
    # YAML 1.1 reads `1e3` and `1.5e3` (an exponent without its sign) as strings; YAML 1.2 and every user
    # mean a number. Numbers are strict (config/fields.py), so it must be one here.
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+.0123456789"),
    )


class PastCeiling(yaml.MarkedYAMLError):  # type: ignore[misc]
    """Input past a structural ceiling (nesting depth, integer length); `problem_mark` says where."""


def load_yaml(text: str, *, fast: bool = False) -> Any:
    """Parse YAML safely, refusing duplicate keys; raises yaml.YAMLError (marked with the line).

    `fast`: parse with libyaml first (large machine-written files: profiles). Where it finds
    anything wrong, or nesting past MAX_DEPTH, the Python loader parses again and raises its own
    error, so a bad file reads exactly as without `fast`."""
    if fast and _CSafeLoader is not None:
        try:
            if _shallow(text):
                return yaml.load(text, Loader=_FastLoader)
        except yaml.YAMLError:
            pass  # the Python loader says what is wrong, in its words
    return yaml.load(text, Loader=_UniqueKeyLoader)


def _shallow(text: str) -> bool:
    """No collection nested past MAX_DEPTH, read from libyaml's event stream (its parser is a
    state machine: no recursion however deep the input)."""
    depth = 0
    for event in yaml.parse(text, Loader=_CSafeLoader):
        if isinstance(event, _OPENS):
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif isinstance(event, _CLOSES):
            depth -= 1
    return True


_OPENS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSES = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def load_mapping(path: Path, *, fast: bool = False) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping; syntax errors and duplicate keys carry the line.
    `fast`: see load_yaml."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, "", f"cannot read: {exc}") from None
    try:
        data = load_yaml(text, fast=fast)
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
