"""SPEC 1 layering, read from the source: which part of hermes_context may import which.

Every import counts: at module level, inside functions, under ``TYPE_CHECKING``,
relative or absolute, and ``importlib.import_module`` / ``__import__`` with a
literal name. A lazy import is still a dependency, so it breaks the rules too.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "hermes_context"
SRC = Path(__file__).parents[1] / "src" / PACKAGE
ROOT = ""  # the component of ``hermes_context/__init__.py``: the curated public API

# errors, config (with hermes_config, Hermes Agent's keys read into ours), fileio,
# messages, tokens import nothing internal beyond each other. synthetic (transcripts
# for examples, tests and benchmarks) imports nothing internal at all, so it sits here too,
# as does credentials (the credential shapes memory's scanner and compaction share).
BOTTOM = frozenset(
    {
        "config",
        "credentials",
        "errors",
        "fileio",
        "hermes_config",
        "messages",
        "pgsql",
        "synthetic",
        "tokens",
    }
)
# Each imports only the bottom layer: compression talks to a summariser
# interface, never to a concrete client.
MIDDLE = frozenset({"compression", "llm", "memory", "sessions", "skills"})
# The composition layer (SPEC 1: "agent composes them"): tools bind the stores
# for a model, references read files through the tools' sandbox, the agent
# uses all of them.
COMPOSITION = {
    "tools": BOTTOM | MIDDLE,
    "providers": BOTTOM | MIDDLE,
    "references": BOTTOM | {"tools"},
    "agent": BOTTOM | MIDDLE | {"tools", "references", "providers"},
    "bridge": BOTTOM | MIDDLE | {"agent"},
    # The MCP server: the stores behind the bridge's tokens and per-user homes.
    "mcp_server": BOTTOM | MIDDLE | {"bridge"},
}
# What each component may import besides itself. The root package sits above
# every layer; cli uses the public API (no ``_private`` module or name of
# another component, see below) and nothing imports it.
ALLOWED = {
    **dict.fromkeys(BOTTOM, BOTTOM),
    **dict.fromkeys(MIDDLE, BOTTOM),
    **COMPOSITION,
    ROOT: BOTTOM | MIDDLE | set(COMPOSITION),
    "cli": BOTTOM | MIDDLE | set(COMPOSITION) | {ROOT},
}


@dataclass(frozen=True)
class Module:
    name: str  # dotted: hermes_context.llm.client
    path: Path
    shown: str  # the path in messages: hermes_context/llm/client.py
    is_package: bool

    @property
    def component(self) -> str:
        return component_of(self.name)


@dataclass(frozen=True)
class Import:
    importer: Module
    line: int
    text: str  # the statement as written
    target: str  # the hermes_context module it loads
    names: tuple[str, ...] = ()  # names taken from ``target`` (``from X import a``)

    def where(self) -> str:
        return f"{self.importer.shown}:{self.line}: {self.text}"


def component_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def collect_modules(src: Path = SRC, package: str = PACKAGE) -> dict[str, Module]:
    modules = {}
    for path in sorted(src.rglob("*.py")):
        parts = [package, *path.relative_to(src).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        shown = path.relative_to(src.parent).as_posix()
        modules[".".join(parts)] = Module(".".join(parts), path, shown, is_package)
    return modules


def _package_of(module: Module) -> str:
    return module.name if module.is_package else module.name.rpartition(".")[0]


def _absolute(module: Module, name: str, level: int) -> str:
    """``name`` imported ``level`` dots up from ``module`` (level 0: already absolute)."""
    if level == 0:
        return name
    base = _package_of(module).split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _literal_import(module: Module, call: ast.Call) -> str | None:
    """The module named by ``importlib.import_module("x")`` or ``__import__("x")``."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__") or not call.args:
        return None
    first = call.args[0]
    if not isinstance(first, ast.Constant) or not isinstance(first.value, str):
        return None
    level = len(first.value) - len(first.value.lstrip("."))
    return _absolute(module, first.value[level:], level)


def imports_of(module: Module, modules: dict[str, Module]) -> list[Import]:
    """Every import of a hermes_context module in ``module``, at any depth."""
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            text = ast.unparse(node)
            found += [Import(module, node.lineno, text, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            text = ast.unparse(node)
            base = _absolute(module, node.module or "", node.level)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in modules:  # ``from . import assembly``: the module itself
                    found.append(Import(module, node.lineno, text, submodule))
                else:
                    found.append(Import(module, node.lineno, text, base, (alias.name,)))
        elif isinstance(node, ast.Call) and (target := _literal_import(module, node)):
            found.append(Import(module, node.lineno, ast.unparse(node), target))
    ours = [i for i in found if i.target == PACKAGE or i.target.startswith(PACKAGE + ".")]
    return sorted(ours, key=lambda i: i.line)


@functools.cache
def _all_imports() -> list[Import]:
    modules = collect_modules()
    return [i for m in modules.values() for i in imports_of(m, modules)]


def _component_rule(imp: Import) -> str | None:
    own, other = imp.importer.component, component_of(imp.target)
    if other == own or other in ALLOWED.get(own, frozenset()):
        return None
    if other == "cli":
        return "nothing imports cli: it is the command layer on top of the library"
    if own in BOTTOM:
        return f"{own} is bottom layer: it imports only {', '.join(sorted(BOTTOM))}"
    if own in MIDDLE:
        return (
            f"{own} imports only the bottom layer ({', '.join(sorted(BOTTOM))}), "
            f"not {other or 'the hermes_context package'}"
        )
    return f"{own or PACKAGE} may not import {other}"


def _cycle_rule(imp: Import) -> str | None:
    """A module never imports a package it belongs to: that package's ``__init__`` imports it."""
    parts = imp.importer.name.split(".")
    ancestors = {".".join(parts[:n]) for n in range(1, len(parts))}
    if imp.target not in ancestors:
        return None
    if imp.target == PACKAGE and imp.importer.component == "cli":
        return None  # the public API; hermes_context/__init__ never imports cli
    return f"imports its own package {imp.target} (an import cycle: the package imports it)"


def _private_rule(imp: Import) -> str | None:
    """``_private`` modules and names are not imported across components (STYLE 3)."""
    if component_of(imp.target) == imp.importer.component:
        return None
    parts = imp.target.split(".")[1:] + list(imp.names)
    private = [p for p in parts if p.startswith("_") and not p.startswith("__")]
    if not private:
        return None
    return f"{private[0]} is private to {component_of(imp.target) or PACKAGE}"


def violations(rule, imports=None, components=None) -> list[str]:
    """``file:line: import  ->  why`` for each import in ``components`` that breaks ``rule``."""
    return [
        f"{imp.where()}  ->  {why}"
        for imp in (_all_imports() if imports is None else imports)
        if (components is None or imp.importer.component in components) and (why := rule(imp))
    ]


# -- the rules on the real source -------------------------------------------------------


def test_every_module_has_a_layer():
    components = {m.component for m in collect_modules().values()}
    unknown = sorted(components - set(ALLOWED))
    assert not unknown, f"put these in a layer (SPEC 1) in tests/test_layering.py: {unknown}"


def test_bottom_layer_imports_only_itself():
    assert violations(_component_rule, components=BOTTOM) == []


def test_middle_layer_imports_only_the_bottom_layer():
    assert violations(_component_rule, components=MIDDLE) == []


def test_composition_layer_imports_only_what_it_composes():
    assert violations(_component_rule, components=set(COMPOSITION)) == []


def test_nothing_imports_cli():
    assert violations(_component_rule, components={ROOT, "cli"}) == []


def test_no_module_imports_its_own_package():
    assert violations(_cycle_rule) == []


def test_private_names_stay_in_their_component():
    assert violations(_private_rule) == []


# -- the scanner itself -------------------------------------------------------------------

_SAMPLE = """
import importlib
from typing import TYPE_CHECKING

from ..errors import LLMAPIError
from .. import llm

if TYPE_CHECKING:
    from hermes_context.sessions.db import SessionDB


def later():
    from ..llm.client import ChatClient
    import hermes_context.cli.main
    return importlib.import_module("hermes_context.memory"), importlib.import_module(".prune", __package__)
"""


@pytest.fixture
def sample(tmp_path):
    root = tmp_path / PACKAGE
    for name in ("errors.py", "llm/__init__.py", "llm/client.py", "compression/__init__.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "compression" / "compressor.py").write_text(_SAMPLE)
    modules = collect_modules(root)
    return imports_of(modules[f"{PACKAGE}.compression.compressor"], modules)


def test_scanner_sees_every_kind_of_import(sample):
    found = {(i.line, i.target, i.names) for i in sample}
    assert found == {
        (5, f"{PACKAGE}.errors", ("LLMAPIError",)),
        (6, f"{PACKAGE}.llm", ()),
        (9, f"{PACKAGE}.sessions.db", ("SessionDB",)),
        (13, f"{PACKAGE}.llm.client", ("ChatClient",)),
        (14, f"{PACKAGE}.cli.main", ()),
        (15, f"{PACKAGE}.memory", ()),
        (15, f"{PACKAGE}.compression.prune", ()),
    }


def test_violations_name_file_line_and_import(sample):
    found = violations(_component_rule, sample)
    assert found[0] == (
        f"{PACKAGE}/compression/compressor.py:6: from .. import llm  ->  compression imports "
        "only the bottom layer (config, credentials, errors, fileio, hermes_config, messages, pgsql, "
        "synthetic, tokens), not llm"
    )
    assert len(found) == 5  # llm twice, sessions, cli, memory; errors and prune are allowed
    assert any("nothing imports cli" in v for v in found)


def test_cycles_and_private_names_are_found(tmp_path):
    files = {
        "__init__.py": "from . import llm\n",
        "errors.py": "",
        "llm/__init__.py": "from .client import ChatClient\n",
        "llm/client.py": "def gate():\n    from hermes_context import llm\n    from ..errors import _KINDS\n",
        "cli/__init__.py": "",
        "cli/main.py": "from .. import __version__\n",
    }
    for name, text in files.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    modules = collect_modules(tmp_path / PACKAGE)
    imports = [i for m in modules.values() for i in imports_of(m, modules)]
    assert violations(_cycle_rule, imports) == [
        f"{PACKAGE}/llm/client.py:2: from hermes_context import llm  ->  imports its own "
        f"package {PACKAGE}.llm (an import cycle: the package imports it)"
    ]
    assert violations(_private_rule, imports) == [
        f"{PACKAGE}/llm/client.py:3: from ..errors import _KINDS  ->  _KINDS is private to errors"
    ]
