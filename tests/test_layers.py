"""The package's shape: four parts, each importing only the parts below it, and a map of where
every rule lives (docs/architecture.md) that names only files that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "trainplan"
# Lower parts first: a module may import its own part and the parts before it.
PARTS = ("specs", "inputs", "engine", "interfaces")


def _imports(path: Path) -> list[str]:
    """Every trainplan module a file imports, at the top or inside a function."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "trainplan" and [a.name for a in node.names] == ["__version__"]:
                continue  # the version string, not the public API the face re-exports
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [name for name in names if name.split(".")[0] == "trainplan"]


def test_the_top_level_is_the_four_parts() -> None:
    found = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert found == {*PARTS, "__init__.py", "data", "py.typed"}


def test_no_import_runs_back_up() -> None:
    upward = []
    for path in PACKAGE.rglob("*.py"):
        part = path.relative_to(PACKAGE).parts[0]
        if part not in PARTS:
            continue
        for name in _imports(path):
            target = name.split(".")[1] if name.count(".") else ""
            if target in PARTS and PARTS.index(target) > PARTS.index(part):
                upward.append(f"{path.relative_to(PACKAGE)} imports {name}")
            # the package's face (trainplan/__init__) re-exports the engine: no part may use it
            if name == "trainplan":
                upward.append(f"{path.relative_to(PACKAGE)} imports the package face")
    assert upward == []


def test_the_engine_never_imports_an_interface_library() -> None:
    for path in (PACKAGE / "engine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                assert (module or "").split(".")[0] not in {"typer", "rich", "fastapi", "uvicorn"}, path


def test_the_architecture_page_names_only_files_that_exist() -> None:
    """Each `path.py`, `folder/` or `data/file.yaml` the page names, under src/trainplan/."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+(?:\.py|\.yaml|/))`", text))
    assert len(named) > 60
    missing = sorted(
        name
        for name in named
        if "/" in name
        and not (ROOT / name if name.startswith(("src/", "tests/")) else PACKAGE / name).exists()
    )
    assert missing == []
    # a bare module name must be one file somewhere in the package
    bare = [name for name in named if "/" not in name]
    for name in bare:
        assert list(PACKAGE.rglob(name)), name


def test_every_module_has_a_home_on_the_page() -> None:
    """Every module of the four parts is named on the architecture page: by its path or file
    name, or, inside a sub-folder (engine/terms/, inputs/hf/, ...), by that folder."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    unnamed = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] not in PARTS or path.name == "__init__.py":
            continue
        folder = "/".join(rel.parts[:-1]) + "/"
        named = str(rel) in text or path.name in text or (len(rel.parts) > 2 and folder in text)
        if not named:
            unnamed.append(str(rel))
    assert unnamed == []
