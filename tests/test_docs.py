"""The docs cannot go stale: docs/operations.md documents every lifecycle edge and every policy
default it lists, and every figure README.md and docs/*.md quote from a benchmark or a simulation is
the one its results file holds.

The marker convention (docs/README of benchmarks/results, in benchmarks/results/README.md):

- A quoted number is followed at once by `<!-- = FILE.json:key.path -->` (optionally ` *SCALE`,
  e.g. `*100` for a ratio shown as a percentage, `*-1` for "x % less"): the number must equal the
  value at `key.path` in `benchmarks/results/FILE.json`, rounded to the decimals the doc shows.
- A table a benchmark writes sits between `<!-- table FILE.json:key -->` and `<!-- /table -->`, and
  must be exactly the list of lines at that key.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from autoscaler.config.policy import (
    AgentsConfig,
    GatewayConfig,
    LeaderConfig,
    ProviderConfig,
    RatesConfig,
    ScalingConfig,
)
from autoscaler.core.fleet.lifecycle import TRANSITIONS

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "operations.md"
RESULTS = ROOT / "benchmarks" / "results"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIGURE = re.compile(
    r"(?P<num>-?\d[\d,]*(?:\.\d+)?)(?P<gap>\s*)<!-- = (?P<file>[\w.-]+\.json):(?P<key>[\w.\[\]/-]+)(?: \*(?P<scale>-?[\d.]+))? -->"
)
TABLE = re.compile(
    r"<!-- table (?P<file>[\w.-]+\.json):(?P<key>[\w.\[\]/-]+) -->\n(?P<body>.*?)\n?<!-- /table -->", re.S
)

pytestmark = pytest.mark.unit


@cache
def results(name: str) -> Any:
    return json.loads((RESULTS / name).read_text())


def lookup(doc: Any, key: str) -> Any:
    """`runs.igniter/seasonal.cost` style paths: dots separate keys, [i] indexes lists; a key may hold
    a slash (run labels do)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        doc = doc[int(part[1:-1])] if part.startswith("[") else doc[part]
    return doc


def figures() -> list[tuple[str, re.Match[str]]]:
    return [(p.name, m) for p in DOCS for m in FIGURE.finditer(p.read_text())]


def test_every_marker_follows_a_number() -> None:
    for path in DOCS:
        text = path.read_text()
        assert text.count("<!-- = ") == len(FIGURE.findall(text)), f"{path.name}: a marker without a number before it"


@pytest.mark.parametrize(("doc", "match"), figures(), ids=[f"{d}:{m['key']}" for d, m in figures()])
def test_quoted_figure_equals_its_result(doc: str, match: re.Match[str]) -> None:
    value = lookup(results(match["file"]), match["key"]) * float(match["scale"] or 1)
    shown = match["num"].replace(",", "")
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    assert f"{value:.{decimals}f}" == shown, f"{doc} quotes {match['num']}; {match['file']}:{match['key']} says {value}"


def test_embedded_tables_equal_their_results() -> None:
    for path in DOCS:
        text = path.read_text()
        assert text.count("<!-- table ") == len(TABLE.findall(text)), f"{path.name}: a table marker without its end"
        for m in TABLE.finditer(text):
            want = lookup(results(m["file"]), m["key"])
            assert m["body"].splitlines() == want, f"{path.name}: {m['file']}:{m['key']}"


# A figure-like number, not part of a version, a path or an identifier: two or more decimals
# (`dec`), a dollar amount (`usd`), or an integer or one-decimal number followed by a unit (`num`,
# `unit`: 65.8 %, 257 s, 0.8 x, 934 MB, 40.97 $/h).
NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNIT = r"(?:%|x(?![\w-])|ms\b|µs\b|s\b|min\b|MB\b|GB\b|req/s|instance-hours\b|\$/h)"
FIGURE_LIKE = re.compile(
    rf"(?<![\w.\-/$])(?:\$(?P<usd>{NUMBER})|(?P<num>{NUMBER}) (?P<unit>{UNIT})|(?P<dec>\d+\.\d{{2,}}))(?![\w.]*[/\w])"
)
# A number with a unit near one of these words is not a result of this project: a setting ("a
# 180 s boot", "headroom 0.4", "every 30 s", "the default 10 %", "spot at 35 %", "60 s rows"), a bound a test
# asserts ("at most 0.5 %", "within 5 points"), a window ("the next 5 s"), a load a test applies
# ("a steady 400 req/s load") or a published figure ("the published model: about 3.5 %").
NOT_A_RESULT = re.compile(
    r"\b(boots?|boot_s|ticks?|interval|delay|window|headroom|SLO|budget|target|default|limit|timeout|"
    r"warning|price|floor|cap|every|tolerance|spot|published|within|most|least|next|load|steady|rows|means|"
    r"rotated)\b",
    re.I,
)


def is_setting(part: str, m: re.Match[str]) -> bool:
    """Code, a backticked setting's value, a version, a multiplier, or a number with a unit among
    NOT_A_RESULT's words (four words before it, three after). Numbers with two or more decimals
    and dollar amounts are always results here."""
    before = part[: m.start()]
    if before.count("`") % 2 or re.search(r"`\s*\(?\s*$", before):  # code, or a setting's value
        return True
    if before.split()[-1:] in (["Python"], ["Terraform"], ["Ubuntu"], ["Debian"]):  # a version
        return True
    if not m["unit"] or ("." in m["num"] and len(m["num"].split(".")[1]) > 1):
        return False
    if before.split()[-1:] == ["x"]:  # a multiplier: "rates x 1.4", "59 rows x 100 x 1.5"
        return True
    words = re.compile(r"[\w'-]+")
    near = " ".join(words.findall(before)[-4:] + words.findall(part[m.end() :])[:3])
    return bool(NOT_A_RESULT.search(near))


def unmarked_figures(part: str) -> list[str]:
    """The figure-like numbers of `part` (a paragraph) that no marker follows and that are not
    settings: each with the line it sits on."""
    out = []
    for m in FIGURE_LIKE.finditer(part):
        if is_setting(part, m) or part[m.end() :].lstrip().startswith("<!-- = "):
            continue
        if m["num"] and part[m.start() + len(m["num"]) :].lstrip().startswith("<!-- = "):
            continue
        line = part[: m.start()].rsplit("\n", 1)[-1] + part[m.start() :].split("\n", 1)[0]
        out.append(f"{m.group().strip()}: {line.strip()}")
    return out


# A paragraph that names a benchmark or a results file speaks of measurements.
NAMES_RESULTS = re.compile(r"benchmarks/|results/|\b[\w-]+\.json\b")


def near_marked_figures(text: str) -> list[str]:
    """The paragraphs of `text` that quote a results file or speak of a benchmark: those holding a
    marker, those naming a benchmark or a results file, and those right before and after a table
    block (they describe it)."""
    out = []
    parts = re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.) )", text)  # paragraphs, and each list item
    for i, part in enumerate(parts):
        after_table = i > 0 and parts[i - 1].rstrip().endswith("<!-- /table -->")
        before_table = i + 1 < len(parts) and parts[i + 1].lstrip().startswith("<!-- table")
        if "<!-- = " in part or NAMES_RESULTS.search(part) or after_table or before_table:
            out.append(part)
    return out


def test_no_unmarked_figure_beside_marked_ones() -> None:
    """A paragraph that quotes a results file, names a benchmark or a results file, or introduces
    or follows an embedded table quotes every figure of it from one: a number left unmarked
    beside marked ones would go stale unseen, as the prose around the ServeGen table once did.
    Table blocks themselves are checked whole above."""
    for path in DOCS:
        text = TABLE.sub("<!-- table --><!-- /table -->", path.read_text())  # its lines are checked above
        for part in near_marked_figures(text):
            found = unmarked_figures(part)
            assert not found, f"{path.name}: unmarked figure beside marked ones: {found[0]}"


PLANTED = (
    "igniter costs 1,293.69<!-- = simulate_example.json:figures.cost_usd --> in all; it saved {} against the "
    "oracle's whole replay.\nAt headroom 0.4, a 180 s boot, rates x 1.4 and ticks every 30 s (the default 10 % "
    "of the fleet) on A100 80GB GPUs, Python 3.11."
)


@pytest.mark.parametrize(
    ("figure", "caught"),
    [
        ("65.8 %", "65.8 %"),
        ("12 %", "12 %"),
        ("0.8 x", "0.8 x"),
        ("257 s of CPU", "257 s"),
        ("$1,084", "$1,084"),
        ("3.51 more", "3.51"),
        ("934 MB", "934 MB"),
        ("4.6 ms", "4.6 ms"),
    ],
)
def test_a_planted_stale_figure_is_caught(figure: str, caught: str) -> None:
    """The rule itself: a one-decimal or whole figure with a unit, a dollar amount or a two-decimal
    number beside a marked one is reported; the settings around it are not."""
    assert unmarked_figures(PLANTED.format("nothing")) == []
    found = unmarked_figures(PLANTED.format(figure))
    assert [f.split(": ")[0] for f in found] == [caught]


def test_settings_and_marked_figures_pass() -> None:
    for text in (
        "a 180 s boot<!-- = a.json:b -->",
        "`headroom` 0.4 and `max_surge` 0.25 give 2<!-- = a.json:b --> short rows",
        "the 0.5 x target<!-- = a.json:b -->",
        "cost 0.81<!-- = a.json:b --> x peak and 12.5<!-- = a.json:c --> %",
        "Python 3.11 on A100 80GB, see docs/x.md and v1.2.3<!-- = a.json:b -->",
    ):
        assert unmarked_figures(text) == [], text


def test_a_paragraph_naming_a_benchmark_is_checked_without_a_marker() -> None:
    """A paragraph that names a benchmark or a results file is checked even with no marker in it;
    one that names neither is not (settings and examples live there)."""
    text = "Measured by `benchmarks/x.py`: 65.8 % fewer restarts.\n\nIn words only: 65.8 % fewer restarts."
    parts = near_marked_figures(text)
    assert parts == ["Measured by `benchmarks/x.py`: 65.8 % fewer restarts."]
    assert [f.split(": ")[0] for f in unmarked_figures(parts[0])] == ["65.8 %"]
    assert unmarked_figures("written to `warm_pool.json`; `warm_boot_s` (45 s) and `refill_delay_s` (1800 s)") == []


def test_the_docs_quote_results() -> None:
    """The convention is in use, so a broken regex cannot pass silently: README's install sizes and
    planner figures, docs/planner.md's tables, docs/simulate.md's console example, quality tables,
    rollout, idle-share and speed figures."""
    assert {m["file"] for _, m in figures()} >= {"install_size.json", "plan_quality.json", "model_accuracy.json"}
    tables = {m["file"] for p in DOCS for m in TABLE.finditer(p.read_text())}
    assert tables >= {
        "plan_quality.json",
        "plan_scale.json",
        "simulate_example.json",
        "servegen_compare.json",
        "simulate_quality_servegen.json",
        "simulate_quality_azure.json",
        "mig_vs_parvagpu.json",
    }
    assert {m["file"] for _, m in figures()} >= {"rollout.json", "idle_share.json", "simulate_speed.json"}


# README.md and the docs its first screen links to for what moved out of it (issue 51): the
# commands a newcomer pastes from them are held to the same rules.
PASTED = [ROOT / "README.md", *(ROOT / "docs" / f"{n}.md" for n in ("cli", "architecture", "install", "development"))]


def readme_commands() -> list[list[str]]:
    """The `sh` blocks of README.md and the docs it moved to (PASTED) as lists of commands:
    continuation lines joined, here-document bodies and comment-only lines left out."""
    blocks = []
    for block in re.findall(r"```sh\n(.*?)```", "\n".join(p.read_text() for p in PASTED), re.S):
        block = re.sub(r"<<'(\w+)'\n.*?\n\1\n", "\n", block, flags=re.S)  # here-documents
        block = re.sub(r"\\\n\s*", " ", block)
        blocks.append([line for line in block.splitlines() if line.strip() and not line.startswith("#")])
    return blocks


# Commands that take more than about 30 s here, and the words that say how long.
LONG = re.compile(
    r"^(make (demo|demo-mig|test|venv|bench|chaos)\b|igniter simulate |pip install torch|\S*python \S*benchmarks/)"
)
HOW_LONG = re.compile(r"#.*(\d\s*(s|min|minutes?|hours?)\b|minutes|seconds|hours|a minute)")


def test_readme_blocks_that_start_processes_stop_them() -> None:
    """Issue 33: every README block that sends a process to the background ends with the command
    that stops it (`kill`, `igniter down`), so a reader who pastes it leaves nothing running."""
    started = [b for b in readme_commands() if any(re.search(r"&\s*(#|$)", c) for c in b)]
    assert len(started) >= 3, "the quick start, the agent and the leader blocks start processes"
    for block in started:
        # `igniter run`'s local instances and gateway outlive it, as VMs would: only `igniter down` stops them
        stop = r"igniter down\b" if any(c.startswith("igniter run ") for c in block) else r"(kill|igniter down)\b"
        assert re.match(stop, block[-1]), f"README block ends without its stop: {block[-1]}"


def test_readme_says_how_long_the_long_commands_take() -> None:
    """Issue 33: every pasted command that takes more than about 30 s says how long it takes."""
    commands = [c for b in readme_commands() for c in b if LONG.match(c)]
    assert len(commands) >= 8
    for command in commands:
        assert HOW_LONG.search(command), f"README: no duration given for: {command}"


def test_every_transition_is_in_the_table() -> None:
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 3:
            rows.append(({f.strip() for f in cells[0].split(",")}, cells[1], cells[2]))
    for a, reason, b in [(a.value, r.value, b.value) for (a, r), b in TRANSITIONS.items()]:
        assert any(a in froms and reason == r and b == to for froms, r, to in rows), (a, reason, b)


def test_documented_defaults_match_the_schema() -> None:
    text = DOC.read_text()
    block = text.split("## Policy sections (all optional)", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    doc = yaml.safe_load(block)
    for section, model in (
        ("provider", ProviderConfig),
        ("agents", AgentsConfig),
        ("scaling", ScalingConfig),
        ("rates", RatesConfig),
        ("leader", LeaderConfig),
        ("gateway", GatewayConfig),
    ):
        defaults = model().model_dump()
        for key, value in doc[section].items():
            assert key in defaults, f"{section}.{key} is documented but not in the schema"
            assert defaults[key] == value, f"{section}.{key}: documented {value!r}, default {defaults[key]!r}"
        assert set(doc[section]) == set(defaults), f"{section}: undocumented {set(defaults) - set(doc[section])}"


NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def test_a_heading_that_counts_commands_counts_its_block() -> None:
    """'## Two commands' over a block of three was what a newcomer read first (issue 51)."""
    counted = 0
    for path in DOCS:
        for word, block in re.findall(r"^#+ (\w+) commands\n+```sh\n(.*?)```", path.read_text(), re.M | re.S):
            commands = [ln for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]
            assert NUMBER_WORDS.get(word.lower()) == len(commands), f"{path.name}: '{word} commands' over {commands}"
            counted += 1
    assert counted >= 1


def test_the_debian_packages_named_are_the_makefiles() -> None:
    """The packages `make test` installs (the Makefile's DEBS, `package:command` pairs) are the
    ones the docs name, in every place that names them."""
    debs = re.search(r"^DEBS := (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert debs, "Makefile: no DEBS"
    want = {pair.split(":")[0] for pair in debs[1].split()}
    named = [
        (path.name, set(re.split(r",\s*", m[1])))
        for path in DOCS
        for m in re.finditer(r"Debian packages its tests start\s+for real \(([^)]*)\)", path.read_text())
    ]
    assert named, "no doc names the Debian packages"
    for name, packages in named:
        assert packages == want, f"{name}: names {sorted(packages)}, the Makefile installs {sorted(want)}"
