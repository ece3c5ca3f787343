"""The front doors stay readable and their links lead somewhere (issue #45 item 7).

Every relative link in README.md and docs/ (design records included) names a file that
exists and, for `file.md#anchor`, a heading of that file (GitHub's anchor rule: lower case,
punctuation dropped, spaces to hyphens). docs/architecture.md is a map: no line over 400
characters (long records live in docs/design/). No root, no network: plain file reads.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # images too: their files must exist as well
MAX_LINE = 400


def _anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", path.read_text(), re.M)}


def broken_links(files: list[Path], root: Path = ROOT) -> list[str]:
    bad = []
    for f in files:
        text = re.sub(r"```.*?```", "", f.read_text(), flags=re.S)  # code blocks are not links
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            path, _, frag = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            if not dest.exists():
                bad.append(f"{f.relative_to(root)}: {target}: no such file")
            elif frag and dest.suffix == ".md" and frag not in _anchors(dest):
                bad.append(f"{f.relative_to(root)}: {target}: no heading #{frag}")
    return bad


def long_lines(path: Path, limit: int = MAX_LINE) -> list[str]:
    return [f"{path.name}:{i}: {len(line)} characters: {line[:60]}..."
            for i, line in enumerate(path.read_text().splitlines(), 1) if len(line) > limit]


def test_every_relative_link_in_the_docs_leads_somewhere():
    assert len(DOCS) > 20, DOCS
    bad = broken_links(DOCS)
    assert not bad, "\n".join(bad)


def test_the_link_check_finds_a_broken_link_and_a_missing_heading(tmp_path):
    (tmp_path / "there.md").write_text("# A heading, with punctuation!\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](there.md#a-heading-with-punctuation) [web](https://example.org/x)\n"
                   "[gone](nowhere.md) [wrong](there.md#no-such-heading)\n```\n[code](not-a-link.md)\n```\n")
    bad = broken_links([doc], root=tmp_path)
    assert bad == ["doc.md: nowhere.md: no such file", "doc.md: there.md#no-such-heading: no heading #no-such-heading"]


def test_architecture_is_a_map_of_short_lines():
    bad = long_lines(ROOT / "docs" / "architecture.md")
    assert not bad, "\n".join(bad)
