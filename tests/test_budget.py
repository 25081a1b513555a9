"""`make budget`'s report (tests/kit/budget.py) read from a sample of `pytest --durations=0` output: the
tests over 30 s (their phases added up) and the wall time against 10 minutes; it never fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kit.budget import main, parse, report

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.unit

SAMPLE = """\
tests/core/test_ramp.py .........                                        [100%]
some test printed: 3 passed in 1.00s (not pytest's summary)
============================= slowest durations ==============================
73.80s call     tests/cli/test_simulate.py::test_the_documented_example
25.10s setup    tests/fleet/test_ec2_warm_pool.py::test_kill_at[after launch, before tag]
6.00s call     tests/fleet/test_ec2_warm_pool.py::test_kill_at[after launch, before tag]
29.90s call     tests/demo/test_demo_live.py::test_live
0.20s teardown tests/cli/test_simulate.py::test_the_documented_example
0.01s setup    tests/core/test_ramp.py::test_off_with_zero_reads_or_no_history

(3 durations < 0.005s hidden.  Use -vv to show these durations.)
================= 2446 passed, 3 warnings in 1190.52s (0:19:50) ==================
"""


def test_sample_tests_over_30_s_with_their_phases_added_up() -> None:
    t = parse(SAMPLE.splitlines())
    assert t.wall_s == 1190.52  # pytest's summary, not the test's own print
    assert t.over(30.0) == [
        ("tests/cli/test_simulate.py::test_the_documented_example", pytest.approx(74.0)),
        ("tests/fleet/test_ec2_warm_pool.py::test_kill_at[after launch, before tag]", pytest.approx(31.1)),
    ]  # 29.9 s is within; a slow fixture's setup counts against the test that built it
    assert len(t.phases) == 4


def test_report_names_the_slow_tests_and_the_wall_time_against_the_budget() -> None:
    out = report(parse(SAMPLE.splitlines())).splitlines()
    assert out[0] == "budget: 4 test(s) timed; 2 over 30 s"
    assert "74.0 s  tests/cli/test_simulate.py::test_the_documented_example  (call 73.8, teardown 0.2)" in out[1]
    assert "(call 6.0, setup 25.1)" in out[2]
    assert out[-1].startswith("budget: suite wall time 1191 s (19.8 min), OVER by 591 s: the budget of 600 s")
    within = report(parse(SAMPLE.splitlines()), wall_s=540.0).splitlines()[-1]
    assert "suite wall time 540 s (9.0 min), within the budget of 600 s" in within


def test_a_run_cut_short_says_so_and_a_quiet_q_run_is_read(tmp_path, capsys) -> None:
    cut = "\n".join(SAMPLE.splitlines()[:5])
    assert "no wall time" in report(parse(cut.splitlines()))
    quiet = tmp_path / "d.txt"
    quiet.write_text("0.50s call     tests/a.py::test_b\n1 failed, 2 passed in 3.25s\n")
    assert main([str(quiet)]) == 0  # timings and failures alike: the report never fails
    printed = capsys.readouterr().out
    assert "1 test(s) timed; 0 over 30 s" in printed and "suite wall time 3 s" in printed
    assert main([str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt: cannot read" in capsys.readouterr().err


def test_two_runs_add_their_wall_times_and_keep_every_test() -> None:
    """`make budget` runs the suite in parallel, then its SOLO tests alone: one output, two summaries."""
    solo = "12.50s call     tests/a.py::test_alone\n==== 1 passed in 13.00s ====\n"
    t = parse((SAMPLE + solo).splitlines())
    assert t.wall_s == pytest.approx(1190.52 + 13.0)
    assert t.total("tests/a.py::test_alone") == 12.5 and len(t.phases) == 5


def test_the_tests_make_test_runs_alone_exist_and_leave_the_parallel_run() -> None:
    """The Makefile's SOLO node ids name tests that exist (a stale one would fail their pytest), the
    parallel run deselects exactly them, and `make test` fails when either run fails."""
    makefile = (ROOT / "Makefile").read_text()
    solo = re.search(r"^SOLO\s*:= *(.+)$", makefile, re.M)
    assert solo is not None
    for node in solo[1].split():
        path, name = node.split("::")
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.M), node
    recipe = makefile.split("\ntest: setup\n", 1)[1].split("\n\n", 1)[0]
    assert "$(XDIST) --durations=25 $(addprefix --deselect ,$(SOLO)); parallel=$$?;" in recipe
    assert "--durations=5 $(SOLO); alone=$$?;" in recipe
    assert "[ $$parallel -eq 0 ] && [ $$alone -eq 0 ]" in recipe
