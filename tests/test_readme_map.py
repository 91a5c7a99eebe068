"""README's map of the code ("Where things live") names only what exists.

The map is read as a reader would use it: each path in the first column must be in the
checkout, and each module a row names by its bare name (`workspace`, `record`, ...) must be
a module of that row's folder or of the folder the row's files are in. A module that moves
or is renamed then fails here until the map says where it went.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Where things live"
# A bare module name as the map writes it: `workspace`, `steps/count_kernels`.
MODULE = re.compile(r"^[a-z_][a-z0-9_]*(/[a-z_][a-z0-9_]*)*$")


def map_rows() -> list[tuple[str, str]]:
    """(path cell, what cell) of each row of README's map."""
    text = (ROOT / "README.md").read_text()
    assert SECTION in text, f"README.md has no {SECTION!r} section"
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] not in ("path", "---"):
            rows.append((cells[0], cells[1]))
    return rows


def module_exists(folder: Path, name: str) -> bool:
    """Whether `name` (a/b for a sub-folder's module) is a module or package under `folder`,
    at any depth."""
    if (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file():
        return True
    leaf = name.rsplit("/", 1)[-1]
    return any(p.as_posix().endswith(f"{name}.py") for p in folder.rglob(f"{leaf}.py")) or \
        any((p / "__init__.py").is_file() for p in folder.rglob(leaf) if p.as_posix().endswith(name))


def test_the_map_is_there_and_has_rows():
    assert len(map_rows()) >= 20


def test_every_path_and_module_the_map_names_exists():
    missing = []
    for where, what in map_rows():
        tokens = re.findall(r"`([^`]+)`", where)
        paths = [t for t in tokens if "/" in t or "." in t]
        folders = {ROOT / p if p.endswith("/") else (ROOT / p).parent for p in paths}
        for p in paths:
            if not (ROOT / p).exists():
                missing.append(f"{p} (row {where!r})")
        # Bare module names in either cell belong to the row's folders.
        names = [t for t in tokens if t not in paths and MODULE.match(t)]
        if any(p.endswith("/") and p.startswith("kit/") for p in paths):
            names += [t for t in re.findall(r"`([^`]+)`", what) if MODULE.match(t)]
        for name in names:
            if not any(module_exists(f, name) for f in folders):
                missing.append(f"module {name!r} in {', '.join(sorted(str(f.relative_to(ROOT)) for f in folders))}")
    assert not missing, "README's map names what does not exist: " + "; ".join(missing)


def test_every_kit_package_is_on_the_map():
    """Each of kit's packages is somewhere on the map, so a reader finds every folder."""
    named = " ".join(where for where, _ in map_rows())
    packages = sorted(p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "kit").glob("*/__init__.py"))
    absent = [p for p in packages if f"`{p}/" not in named]
    assert not absent, f"kit packages missing from README's map: {absent}"
