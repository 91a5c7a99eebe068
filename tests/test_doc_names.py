"""What README.md, docs/*.md and kit's own comments and docstrings name of kit's code exists:
each `kit.x.y` (a module, then a name in it, then a member of that class) and each
`kit/x/y.py` or `kit/x/` path.

Read from the source (nothing imported): a module is kit/x/y.py or kit/x/y/__init__.py; a
name is defined, assigned or imported at the module's top; a member is defined or declared
in that class or in a base class of the same module. A function, module or option that is
renamed or moved then fails here until the docs say where it went.
"""
from __future__ import annotations

import argparse
import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted((ROOT / "kit").rglob("*.py"))
DOTTED = re.compile(r"(?<![\w./-])kit(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./-])kit/[\w/]*\w(?:\.py|/)?")


def module_file(parts: list[str]) -> Path | None:
    """kit/a/b.py or kit/a/b/__init__.py for ["kit", "a", "b"], None when neither exists."""
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def top_names(path: Path) -> dict[str, ast.AST]:
    """The names a module defines, assigns or imports at its top (classes by their node)."""
    names: dict[str, ast.AST] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name.split(".")[0], node) for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update((n.id, node) for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def members(cls: ast.ClassDef, path: Path) -> set[str]:
    """What a class defines or declares, with what its bases in the same module do."""
    own = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
        elif isinstance(node, ast.Assign):
            own.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
    for base in cls.bases:
        node = top_names(path).get(base.id) if isinstance(base, ast.Name) else None
        if isinstance(node, ast.ClassDef):
            own |= members(node, path)
    return own


def missing(name: str) -> str | None:
    """Why a dotted name does not resolve (None when it does)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(parts[:cut])
        if path is not None:
            break
    else:
        return "no such module"
    rest = parts[cut:]
    if not rest:
        return None
    node = top_names(path).get(rest[0])
    if node is None:
        return f"{path.relative_to(ROOT)} has no {rest[0]!r}"
    if len(rest) > 1 and isinstance(node, ast.ClassDef) and rest[1] not in members(node, path):
        return f"{rest[0]} in {path.relative_to(ROOT)} has no member {rest[1]!r}"
    return None


def named(doc: Path) -> list[tuple[int, str]]:
    """(line, name) of each `kit.x.y` and `kit/x/y` the document names."""
    out = []
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        # A dotted name followed by "/" is a key, not code (the lease marker kit.autothrottle.lease/...).
        out += [(n, m.group()) for m in DOTTED.finditer(line) if line[m.end():m.end() + 1] != "/"]
        out += [(n, m.group()) for m in PATH.finditer(line)]
    return out


@pytest.mark.parametrize("doc", DOCS + SOURCES, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_every_module_function_and_path_the_docs_name_exists(doc):
    wrong = []
    for n, name in named(doc):
        if "/" in name:
            # A module may be named by its path without .py (`kit/throttle/replay`).
            why = None if (ROOT / name).exists() or (ROOT / f"{name}.py").is_file() else "no such file or folder"
        else:
            why = missing(name)
        if why:
            wrong.append(f"{doc.name}:{n}: {name}: {why}")
    assert not wrong, "\n".join(wrong)


def test_the_docs_name_kits_code_at_all():
    # The check reads something: README's map alone names dozens of modules.
    assert len(named(ROOT / "README.md")) > 50


@pytest.mark.parametrize("name, says", [
    ("kit.nothing_here", "kit/__init__.py has no 'nothing_here'"),
    ("kit.plan.nothing_here.f", "kit/plan/__init__.py has no 'nothing_here'"),
    ("kit.cluster.backend.open_backends", "has no 'open_backends'"),
    ("kit.cluster.backend.ClusterBackend.rollbackk", "has no member 'rollbackk'"),
])
def test_a_name_that_is_not_there_is_named_wrong(name, says):
    assert says in (missing(name) or "")


@pytest.mark.parametrize("name", ["kit.cluster.backend", "kit.cluster.backend.open_backend",
                                  "kit.cluster.backend.ClusterBackend.hold_lease", "kit.cluster.kafka",
                                  "kit.errors.BadInput.exit_code"])
def test_a_name_that_is_there_resolves(name):
    assert missing(name) is None


TOKEN = re.compile(r"^[A-Za-z_]\w*(\.py|/)?$")


def where_things_are() -> list[tuple[list[Path], list[str]]]:
    """(folders, bare names) of each bullet of README's "Where things are" naming kit's folders
    (the top level's bullet: kit/ itself, not its packages)."""
    body = (ROOT / "README.md").read_text().split("## Where things are", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in body.splitlines():
        head, _, text = line.partition(":")
        folders = [ROOT / p for p in re.findall(r"`(kit/[\w/]*)`", head)]
        if head == "- Top level":
            folders = [ROOT / "kit"]
        if line.startswith("- ") and folders:
            out.append((folders, [t for t in re.findall(r"`([^`]+)`", text) if TOKEN.match(t)]))
    return out


def known_under(folders: list[Path], top_only: bool) -> set[str]:
    """Modules, packages and their top-level names under `folders` (`top_only`: not in sub-folders)."""
    files = [f for d in folders for f in (d.glob("*.py") if top_only else d.rglob("*.py"))]
    names = {f.stem for f in files} | {f"{f.stem}.py" for f in files}
    names |= {f"{f.parent.name}/" for f in files} | {f.parent.name for f in files}
    for f in files:
        names |= set(top_names(f))
    return names


def test_the_where_things_are_list_names_what_each_folder_holds():
    wrong = []
    bullets = where_things_are()
    for folders, tokens in bullets:
        known = known_under(folders, top_only=folders == [ROOT / "kit"])
        wrong += [f"{t} (under {', '.join(str(f.relative_to(ROOT)) for f in folders)})" for t in tokens
                  if t not in known and t != "kit"]  # `kit`: the command
    assert len(bullets) >= 10
    assert not wrong, "README's \"Where things are\" names what is not there: " + "; ".join(wrong)


# A command the docs show: in backticks in prose, or a line of a fenced block.
COMMAND_IN_TICKS = re.compile(r"`(?:\S*/)?kit ([^`]*)`")
COMMAND_LINE = re.compile(r"^\s*(?:\$ )?(?:\S*/)?kit ([^|;&>#]*)")


def _declared(parser):
    return parser.declared() if hasattr(parser, "declared") else parser


@functools.cache
def kit_parser():
    """The `kit` command's parser, built once (its commands' arguments declared as reached)."""
    from kit.cli import build_parser

    return _declared(build_parser())


def wrong_command(words: list[str]) -> list[str]:
    """What `kit WORDS` names that the command line does not have: a command or subcommand
    before the first option, then each --option of the (sub)command reached. A placeholder
    (ACTION, ...) where a command goes ends the check."""
    parser, path, wrong, leading = kit_parser(), ["kit"], [], True
    for w in words:
        commands = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
        if leading and commands:
            if w.isupper() or "..." in w or "|" in w or w.startswith("<"):
                return wrong
            if w in commands:
                parser = _declared(commands[w])
                path.append(w)
                continue
            if not w.startswith("-"):
                return wrong + [f"{' '.join(path)} has no command {w!r}"]
        leading = leading and w.startswith("-")
        option = re.match(r"--[\w-]+", w)
        if option and option.group() not in parser._option_string_actions:
            wrong.append(f"{' '.join(path)} has no option {option.group()}")
    return wrong


def commands_shown(doc: Path) -> list[tuple[int, list[str]]]:
    out, fenced = [], False
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        for m in (COMMAND_LINE if fenced else COMMAND_IN_TICKS).finditer(line):
            if m.group(1).split():
                out.append((n, m.group(1).replace("\\", " ").split()))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_every_command_and_option_the_docs_show_exists(doc):
    wrong = [f"{doc.name}:{n}: {why}" for n, words in commands_shown(doc) for why in wrong_command(words)]
    assert not wrong, "\n".join(wrong)


def test_the_docs_show_commands_at_all():
    assert sum(len(commands_shown(d)) for d in DOCS) > 200


@pytest.mark.parametrize("words, says", [
    (["plan", "rebalance", "--snapshot", "c.json", "--no-such-option"], "kit plan rebalance has no option --no-such-option"),
    (["sim", "stop", "--state", "DIR", "--kraft"], "kit sim stop has no option --kraft"),
    (["verfiy", "p.json"], "kit has no command 'verfiy'"),
    (["plan", "--zk"], "kit plan has no option --zk"),
])
def test_a_command_or_option_that_is_not_there_is_named(words, says):
    assert says in wrong_command(words)


def test_a_command_that_is_there_passes():
    assert wrong_command(["plan", "rebalance", "--snapshot", "c.json", "--out", "p.json"]) == []
    assert wrong_command(["plan", "ACTION", "--whatever"]) == []
