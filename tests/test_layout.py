"""The house in order: arrows point down, no import cycles, every subpackage in the wheel and
nothing else (no benchmarks, no test helpers), events with stable wire names documented
in docs/events.md, and tests and benchmarks sharing code only through tests/support/."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

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


def installed_packages() -> list[str]:
    """The packages a wheel holds, found as setuptools finds them from pyproject's config."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found = config["tool"]["setuptools"]["packages"]["find"]
    return find_packages(where=str(ROOT), include=found["include"],
                         exclude=found.get("exclude", ()))


def test_the_installed_packages_are_the_four_layers_and_no_benchmark_or_test():
    packages = installed_packages()
    assert {p.split(".")[0] for p in packages} == set(PACKAGES), packages
    assert not [p for p in packages if p.split(".")[0] in ("benchmarks", "tests")]


def test_every_installed_module_serves_the_product():
    # A module that `parley` never reaches, imports inside functions included, would be a
    # benchmark or a test-only helper shipped to users: those live in benchmarks/ and
    # tests/support/.
    graph = project_imports()
    installed = {module_name(p) for pkg in installed_packages()
                 for p in (ROOT / pkg.replace(".", "/")).glob("*.py")}
    reached: set[str] = set()
    todo = ["assistant.__main__", "assistant.cli.main"]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages' __init__
        todo += graph.get(name, ())
    assert installed - reached == set()


def test_no_installed_module_imports_the_benchmarks_or_the_tests():
    for pkg in installed_packages():
        for path in (ROOT / pkg.replace(".", "/")).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                else:
                    continue
                assert not [n for n in names if n.split(".")[0] in ("benchmarks", "tests")], path


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
    for pkg in (*PACKAGES, "benchmarks"):
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
    page = {str(p.relative_to(ROOT)) for p in (ROOT / "assistant" / "web" / "static").iterdir()}
    assert page and page <= names, sorted(page - names)  # `parley web`'s page is shipped
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == set(PACKAGES), tops
    assert not [n for n in names if n.endswith(".json")]


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


def test_the_events_reference_documents_every_event_and_its_fields():
    reference = (ROOT / "docs" / "events.md").read_text(encoding="utf-8")
    section = reference[reference.index("\n## Events\n"):]
    end = section.find("\n## ", 1)
    section = section if end < 0 else section[:end]
    for kind in EVENT_TYPES:
        row = next((line for line in section.splitlines()
                    if line.startswith(f"| `{kind.event_type}` |")), None)
        assert row is not None, kind.event_type
        for field in (f.name for f in dataclasses.fields(kind)):
            assert f"`{field}`" in row, (kind.event_type, field)


def imported_modules(path: Path) -> list[str]:
    """Every module `path` imports, inside functions included, relative imports resolved:
    `from m import a` counts as `m.a`, so `from tests import support` is `tests.support`."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [f"{module}.{alias.name}" for alias in node.names]
    return found


def test_no_test_module_imports_another():
    # What tests share, the stand-in engines included, lives in tests/support/.
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        assert not [n for n in imported_modules(path) if n.startswith("tests.test_")], path.name


def test_no_test_or_test_helper_imports_the_benchmarks():
    # What a test and a benchmark both need (recordings, spoken requests, question sets)
    # lives in tests/support/: a benchmark changed for its figures never breaks a test.
    for path in sorted((ROOT / "tests").rglob("*.py")):
        imports = imported_modules(path)
        assert not [n for n in imports if n.split(".")[0] == "benchmarks"], path


def test_the_benchmarks_import_only_the_shared_support_from_the_tests():
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        from_tests = [n for n in imported_modules(path) if n.split(".")[0] == "tests"]
        shared = [n for n in from_tests if f"{n}.".startswith("tests.support.")]
        assert sorted(set(from_tests) - set(shared)) == [], path


def test_only_the_command_line_reads_the_command_line():
    # Every other front end (and a benchmark, or a test) builds a session from the typed
    # settings (assistant/session/settings.py): argparse belongs to assistant/cli/ alone.
    for path in sorted((ROOT / "assistant").rglob("*.py")):
        if path.relative_to(ROOT).parts[1] == "cli":
            continue
        imports = imported_modules(path)
        assert not [n for n in imports if n.split(".")[0] == "argparse"], path


def test_the_session_builder_alone_makes_a_voice_loop():
    # One place wires a voice loop (its engines, timers, input and output) for every front
    # end and every benchmark, so a new front end is one module that calls the builder and
    # a benchmark measures the session Parley runs.
    makers = set()
    for path in sorted([*(ROOT / "assistant").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "VoiceLoop":
                makers.add(module_name(path))
    assert makers == {"assistant.session.builder"}


def test_the_benchmarks_build_from_typed_settings_not_from_the_command_line():
    # A benchmark says its settings as `assistant.session.settings` values; re-parsing
    # Parley's flags would measure whatever the command line happens to default to.
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        cli = [n for n in imported_modules(path) if f"{n}.".startswith("assistant.cli.")]
        assert cli == [], path
