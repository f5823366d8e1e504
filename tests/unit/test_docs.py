"""The documentation holds together: the README stays a door, every relative link (and its
anchor) resolves, and no page in docs/ is an orphan."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

#: [text](target) outside code; images too. The target stops at whitespace or ")".
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`+[^`\n]*`+")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _pages() -> list[Path]:
    return [README, ROOT / "BENCHMARKS.md", *sorted(DOCS.glob("*.md"))]


def _prose_lines(path: Path, *, strip_code: bool = True) -> list[str]:
    """The file's lines outside fenced code blocks, with inline code removed unless
    ``strip_code`` is false."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(_INLINE_CODE.sub("", line) if strip_code else line)
    return out


def links(path: Path) -> list[str]:
    """Every link target in the prose of ``path``."""
    return [m.group(1) for line in _prose_lines(path) for m in _LINK.finditer(line)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower-cased, markup and punctuation dropped, spaces to
    hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of every heading of ``path`` (a repeated heading gets -1, -2, …)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _prose_lines(path, strip_code=False):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.\-]*:", target, re.IGNORECASE)


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` whose file, or heading, does not exist."""
    broken = []
    for target in links(path):
        if not _relative(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no file {file_part}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    return broken


def linked_pages() -> set[Path]:
    """The docs/ pages a link of the README or of another docs/ page points to."""
    found: set[Path] = set()
    for page in [README, *DOCS.glob("*.md")]:
        for target in links(page):
            file_part = target.partition("#")[0]
            if not _relative(target) or not file_part:
                continue
            dest = (page.parent / file_part).resolve()
            if dest.parent == DOCS.resolve() and dest != page.resolve():
                found.add(dest)
    return found


def test_readme_is_a_door_not_a_manual() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move details to docs/"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_every_docs_page_is_linked() -> None:
    orphans = sorted(p.name for p in DOCS.glob("*.md") if p.resolve() not in linked_pages())
    assert orphans == [], "not linked from README.md or another docs page"


def test_the_checks_can_fail(tmp_path: Path) -> None:
    """A broken file link, a missing anchor and an orphan page are caught."""
    page = tmp_path / "page.md"
    page.write_text(
        "# Top\n\n## A `code` heading, with punctuation!\n\n"
        "[ok](page.md#top) [ok](#a-code-heading-with-punctuation) [web](https://x.org)\n"
        "[gone](missing.md) [no anchor](page.md#nowhere)\n"
        "```\n[in code](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "missing.md: no file missing.md",
        "page.md#nowhere: no heading #nowhere in page.md",
    ]
    assert slug("Run of 4 December 2026 (main at 493cd4c): every target") == (
        "run-of-4-december-2026-main-at-493cd4c-every-target"
    )
