"""README.md and docs/*.md render as written: each is parsed with a CommonMark parser
(markdown-it-py) and every fenced code block must close where its author closed it. A fence line
with prose after the backticks ("``` Editors can validate") does not close a block in CommonMark:
the code block then ran on for 120 lines of README (issue 51), so a line inside a block that starts
with the block's own fence, and an info string that is not a single language word, both fail."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGE = re.compile(r"^[\w+.-]*$")  # `sh`, `yaml`, `json`, `text`, or none

pytestmark = pytest.mark.unit


def fences(text: str) -> list[Token]:
    return [t for t in MarkdownIt("commonmark").parse(text) if t.type == "fence"]


def fence_problems(text: str) -> list[str]:
    """What is wrong with the fenced blocks of one Markdown text, each with its line number."""
    lines = text.splitlines()
    problems = []
    for token in fences(text):
        assert token.map is not None
        start, end = token.map
        last = lines[end - 1].strip() if end - 1 > start else ""
        if not (last.startswith(token.markup) and set(last) == {token.markup[0]}):
            problems.append(f"line {start + 1}: the block opened here is never closed")
        if not LANGUAGE.match(token.info.strip()):
            problems.append(f"line {start + 1}: the fence's info string is prose: {token.info.strip()!r}")
        for i, line in enumerate(token.content.splitlines(), start + 2):
            if line.lstrip().startswith(token.markup):
                problems.append(f"line {i}: a fence inside the block opened on line {start + 1}: {line.strip()!r}")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_every_fenced_block_closes_where_it_is_meant_to(path: Path) -> None:
    assert fences(path.read_text()), f"{path.name}: no code block parsed (is the parser working?)"
    assert fence_problems(path.read_text()) == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("```sh\nls\n``` Editors can validate\nprose\n", "a fence inside the block"),
        ("```sh\nls\n", "never closed"),
        ("Text\n\n```Run this first\nls\n```\n", "info string is prose"),
    ],
)
def test_a_broken_fence_is_caught(text: str, found: str) -> None:
    problems = fence_problems(text)
    assert any(found in p for p in problems), problems


def test_a_sound_document_passes() -> None:
    assert fence_problems("```sh\nls\n```\n\n````md\n```sh\nnested\n```\n````\n\n~~~\nx\n~~~\n") == []


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    tokens = MarkdownIt("commonmark").parse(path.read_text())
    return {slug(tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"}


def links(path: Path) -> list[str]:
    """Every link target of a Markdown file, as written."""
    out = []
    for token in MarkdownIt("commonmark").parse(path.read_text()):
        for child in token.children or []:
            if child.type == "link_open":
                out.append(str(child.attrs["href"]))
    return out


def broken_links(path: Path) -> list[str]:
    """The links of `path` to a file of this repository that does not exist, or to a `#section`
    that is none of its headings."""
    broken = []
    for href in links(path):
        if re.match(r"^[a-z]+:", href):
            continue  # https:, mailto:
        target, _, anchor = href.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists():
            broken.append(f"{href}: no file {target}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{href}: no heading #{anchor} in {file.name}")
    return broken


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_every_link_to_a_doc_and_its_section_resolves(path: Path) -> None:
    """README's sections moved into docs/ (issue 51): every link still lands."""
    assert broken_links(path) == []


def test_a_broken_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Real heading\n")
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\n[ok](b.md#real-heading) [gone](c.md) [moved](b.md#policy) [here](#a) [web](https://x.org)\n")
    assert broken_links(doc) == ["c.md: no file c.md", "b.md#policy: no heading #policy in b.md"]


def test_a_slug_is_githubs() -> None:
    assert (
        slug("MIG GPUs (A100, H100, H200) as slices, with MPS inside")
        == "mig-gpus-a100-h100-h200-as-slices-with-mps-inside"
    )
    assert slug("Operations kit (`deploy/`)") == "operations-kit-deploy"
