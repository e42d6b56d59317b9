"""The documents: a README for users within 400 lines that links every other document, and
no relative link in them pointing at a file or heading that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def links(document: Path) -> list[str]:
    """The link targets in a Markdown file, outside fenced code blocks."""
    return LINK.findall(FENCE.sub("", document.read_text(encoding="utf-8")))


def anchors(document: Path) -> set[str]:
    """The anchors GitHub gives the file's headings: lower case, punctuation dropped,
    spaces as hyphens."""
    text = FENCE.sub("", document.read_text(encoding="utf-8"))
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        found.add(slug.replace(" ", "-"))
    return found


def test_the_readme_is_at_most_400_lines():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= 400, f"README.md has {lines} lines"


def test_every_relative_link_points_at_a_file_and_heading_that_exist():
    broken = []
    for document in DOCUMENTS:
        for target in links(document):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{document.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def test_the_readme_links_every_document():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(README)}
    assert not [d.relative_to(ROOT) for d in DOCUMENTS[1:] if d.resolve() not in linked]


def test_the_readme_keeps_the_two_commands_ci_runs():
    # .ci/run runs exactly `make test`; the README must keep both commands verbatim.
    readme = README.read_text(encoding="utf-8")
    assert "\nmake run " in readme and "\nmake test " in readme


def test_every_runnable_benchmark_is_documented_with_its_command():
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    runnable = [path.stem for path in sorted((ROOT / "benchmarks").glob("*.py"))
                if 'if __name__ == "__main__":' in path.read_text(encoding="utf-8")]
    assert runnable, "no runnable benchmark found"
    assert [name for name in runnable if f"-m benchmarks.{name}" not in readme] == []
