"""Write the results files' figures into the docs: every `<!-- table FILE.json:key -->` block of
README.md and docs/*.md gets the lines at that key, and every marked number
(`NUMBER<!-- = FILE.json:key -->`) the value, rounded to the decimals the doc shows
(benchmarks/results/README.md). Run it after re-running a benchmark, read the diff, reword any
prose the new figures contradict, and commit both; tests/test_docs.py checks the same markers.

    .venv/bin/python benchmarks/embed_results.py [--check]   (--check: change nothing, exit 1 if stale)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_docs import DOCS, FIGURE, RESULTS, TABLE, lookup, results  # noqa: E402

MISSING: set[str] = set()


def _figure(m: re.Match[str]) -> str:
    if not (RESULTS / m["file"]).is_file():
        MISSING.add(m["file"])
        return m.group(0)
    try:
        value = lookup(results(m["file"]), m["key"]) * float(m["scale"] or 1)
    except (KeyError, IndexError):
        MISSING.add(f"{m['file']}:{m['key']}")
        return m.group(0)
    shown = m["num"].replace(",", "")
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    text = f"{value:,.{decimals}f}" if "," in m["num"] else f"{value:.{decimals}f}"
    return text + m.group(0)[len(m["num"]) :]


def _table(m: re.Match[str]) -> str:
    if not (RESULTS / m["file"]).is_file():
        MISSING.add(m["file"])
        return m.group(0)
    lines = lookup(results(m["file"]), m["key"])
    return f"<!-- table {m['file']}:{m['key']} -->\n" + "\n".join(lines) + "\n<!-- /table -->"


def embed(text: str) -> str:
    return FIGURE.sub(_figure, TABLE.sub(_table, text))


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for path in DOCS:
        text = path.read_text()
        new = embed(text)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if not check:
                path.write_text(new)
    print(("stale: " if check else "updated: ") + (", ".join(map(str, stale)) or "nothing"))
    if MISSING:
        print("not in the results yet (left as they are): " + ", ".join(sorted(MISSING)))
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
