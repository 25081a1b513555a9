"""`make budget`'s report: the suite's time against its budget (tests/README.md), read from the output
of `pytest --durations=0`.

A timing is not an assertion (a loaded machine makes any test slow), so this prints and never fails:
the tests over PER_TEST_S (setup, call and teardown added up: a module-scoped fixture's setup counts
against the first test that asks for it, as pytest reports it) and the run's wall time against
SUITE_S. `make budget` exits with pytest's own status.

Run: python -m tests.kit.budget out/durations.txt [--wall SECONDS]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SUITE_S = 600.0  # the whole suite on 2 quiet cores, venv set-up included
PER_TEST_S = 30.0  # any single test, its setup and teardown included

# `12.34s call     tests/a.py::test_b[x, y]` (a parametrized id may hold spaces)
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s+(setup|call|teardown)\s+(\S.*?)\s*$")
# pytest's last line: `== 2446 passed, 3 warnings in 1190.52s (0:19:50) ==` (or without the `=`s, -q)
SUMMARY = re.compile(r"\b(?:passed|failed|errors?|skipped|deselected|no tests ran)\b.*\bin (\d+(?:\.\d+)?)s\b")


@dataclass
class Timings:
    """Seconds per test id and phase, and pytest's own wall time (None when its summary is missing:
    a run cut short); the output of several runs (`make budget`'s parallel run, then the
    Makefile's SOLO tests alone) adds their times."""

    phases: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    wall_s: float | None = None

    def total(self, test: str) -> float:
        return sum(self.phases[test].values())

    def over(self, limit: float) -> list[tuple[str, float]]:
        """The tests over `limit` seconds, slowest first."""
        slow = [(t, self.total(t)) for t in self.phases if self.total(t) > limit]
        return sorted(slow, key=lambda x: (-x[1], x[0]))


def parse(lines: Iterable[str]) -> Timings:
    out = Timings()
    for line in lines:
        if m := DURATION.match(line):
            secs, phase, test = float(m[1]), m[2], m[3]
            out.phases[test][phase] = out.phases[test].get(phase, 0.0) + secs
        elif line.startswith("=") or line[:1].isdigit() or line.startswith("no tests"):
            if s := SUMMARY.search(line):
                out.wall_s = (out.wall_s or 0.0) + float(s[1])
    return out


def report(t: Timings, wall_s: float | None = None, suite_s: float = SUITE_S, per_test_s: float = PER_TEST_S) -> str:
    """The lines `make budget` prints. `wall_s`: the wall time measured around pytest (startup and
    collection included); else pytest's own."""
    wall = wall_s if wall_s is not None else t.wall_s
    over = t.over(per_test_s)
    lines = [f"budget: {len(t.phases)} test(s) timed; {len(over)} over {per_test_s:.0f} s"]
    for test, secs in over:
        parts = ", ".join(f"{p} {s:.1f}" for p, s in sorted(t.phases[test].items()) if s >= 0.05)
        lines.append(f"  {secs:7.1f} s  {test}  ({parts})")
    if wall is None:
        lines.append("budget: no wall time (pytest's summary line is missing: was the run cut short?)")
    else:
        verdict = "within" if wall <= suite_s else f"OVER by {wall - suite_s:.0f} s:"
        lines.append(
            f"budget: suite wall time {wall:.0f} s ({wall / 60:.1f} min), {verdict} the budget of {suite_s:.0f} s "
            "(make test adds the venv set-up, lint and mypy)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("durations", type=Path, help="pytest's output, run with --durations=0")
    ap.add_argument("--wall", type=float, default=None, help="wall seconds measured around the run")
    args = ap.parse_args(argv)
    try:
        text = args.durations.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        print(f"{args.durations}: cannot read: {exc.strerror}", file=sys.stderr)
        return 2
    print(report(parse(text.splitlines()), args.wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
