"""The house in order: arrows point down, no import cycles, every subpackage in the wheel,
events with stable wire names documented in the README."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from assistant.events import EVENT_TYPES, Error, Stage, ToolCall

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("assistant", "audio", "memory", "models")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports() -> dict[str, set[str]]:
    """Every project module and the project modules it imports, inside functions included."""
    modules = {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found |= {t for t in targets if t in modules and t != name}
        graph[name] = found
    return graph


def test_lower_layers_never_import_the_assistant():
    for name, imports in project_imports().items():
        if not name.startswith("assistant"):
            assert not [i for i in imports if i.startswith("assistant")], name


def test_no_module_imports_a_benchmark_but_another_benchmark():
    for name, imports in project_imports().items():
        if not name.startswith("assistant.bench"):
            assert not [i for i in imports if i.startswith("assistant.bench")], name


def test_no_import_cycles():
    graph = project_imports()
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in graph[name]:
            # A package's __init__ importing its own modules is not a cycle between modules.
            if state.get(target) == 1 and not name.startswith(target + "."):
                pytest.fail("import cycle: " + " -> ".join([*path, name, target]))
            if target not in state:
                visit(target, [*path, name])
        state[name] = 2

    for name in graph:
        if name not in state:
            visit(name, [])


def test_no_module_is_over_400_lines():
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            assert len(path.read_text(encoding="utf-8").splitlines()) <= 400, path


def test_a_built_wheel_holds_every_subpackage(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                             "-w", str(tmp_path), str(ROOT)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("parley-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    assert expected <= names, sorted(expected - names)
    assert not [n for n in names if n.startswith("tests/")]


def test_events_have_unique_kebab_case_wire_names_and_json_ready_dicts():
    names = [kind.event_type for kind in EVENT_TYPES]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", n) for n in names)
    call = ToolCall("calculator", {"expression": "6*7"}, "Calculating 6*7")
    assert call.to_dict() == {"type": "tool-call", "name": "calculator",
                              "arguments": {"expression": "6*7"}, "label": "Calculating 6*7"}
    error = Error(Stage.MODEL, "The model failed.")
    assert json.loads(json.dumps(error.to_dict())) == {
        "type": "error", "stage": "model", "message": "The model failed."}


def test_an_error_stage_comes_from_the_fixed_set():
    assert Error("stt", "x").stage is Stage.STT
    with pytest.raises(ValueError):
        Error("somewhere", "x")


def test_the_readme_documents_every_event_and_its_fields():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Events"):]
    section = section[:section.index("\n## ")]
    for kind in EVENT_TYPES:
        row = next((line for line in section.splitlines()
                    if line.startswith(f"| `{kind.event_type}` |")), None)
        assert row is not None, kind.event_type
        for field in (f.name for f in dataclasses.fields(kind)):
            assert f"`{field}`" in row, (kind.event_type, field)


def test_no_test_module_imports_another():
    # What tests share lives in tests/support/ (and the stand-in engines in tests/fakes.py).
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):  # `from tests import test_x`, `from . …`
                module = "tests." * (node.level > 0) + (node.module or "")
                names = [module] + [f"{module.rstrip('.')}.{a.name}" for a in node.names]
            else:
                continue
            assert not [n for n in names if n.startswith("tests.test_")], path.name
