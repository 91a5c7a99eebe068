"""Each module handed a cluster's backend names the roles of `kit.cluster.backend` it uses.

A function's parameter (or an attribute set from one) that holds a backend is annotated with
a role protocol (`Reading`, `Throttling`, ...) or a protocol the module composes from roles
(the auto-throttle's `ThrottledCluster`), never the whole `ClusterBackend`; and every member the
function reads from it belongs to those roles. So a reader sees, at each signature, what a
module may do to a cluster: the auto-throttle never starts a reassignment, the dashboard's
poller changes nothing. Read statically (the CLI keeps the seam out of `kit --help`, so its
names live under TYPE_CHECKING there). Backends themselves (kit/cluster/) are left out.
"""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from kit.cluster.backend import ROLES

ROOT = Path(__file__).resolve().parents[1]
ROLE = {r.__name__: r for r in ROLES}


def role_members(role) -> set[str]:
    """What a caller may read from a role: its methods and its declared attributes."""
    own = {n for n, v in vars(role).items() if callable(v) and not n.startswith("_")}
    return own | set(inspect.get_annotations(role))


def _names(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} if node is not None else set()


def protocols(tree: ast.Module) -> dict[str, set[str] | None]:
    """The seam's names this module can annotate with: {name: members}, None for `ClusterBackend`."""
    known: dict[str, set[str] | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "kit.cluster.backend":
            for a in node.names:
                if a.name in ROLE:
                    known[a.asname or a.name] = role_members(ROLE[a.name])
                elif a.name == "ClusterBackend":
                    known[a.asname or a.name] = None
    for node in ast.walk(tree):  # a module's own compositions of roles
        if isinstance(node, ast.ClassDef):
            bases = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id != "Protocol"]
            if bases and all(known.get(b) is not None for b in bases):
                known[node.name] = set().union(*(known[b] for b in bases))
    return known


def _attrs_of(body: list[ast.AST], holder) -> list[ast.Attribute]:
    """Every `x.member` in `body` where `holder(x)` says x is the backend."""
    return [n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Attribute) and holder(n.value)]


def check(source: str, where: str = "<module>") -> list[str]:
    """What breaks the rule in one module's source (empty: nothing)."""
    tree = ast.parse(source)
    known = protocols(tree)
    why: list[str] = []

    def allowed(annotation: ast.AST | None, what: str) -> set[str] | None:
        named = [n for n in _names(annotation) if n in known]
        if not named:
            return None
        if any(known[n] is None for n in named):
            why.append(f"{where}: {what} takes the whole ClusterBackend; name the roles it uses")
            return None
        return set().union(*(known[n] for n in named))

    def uses(nodes: list[ast.Attribute], members: set[str], what: str) -> None:
        for n in nodes:
            if n.attr not in members:
                why.append(f"{where}:{n.lineno}: {what}.{n.attr} is in none of the roles it is annotated with")

    for cls in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)] + [tree]:
        fields: dict[str, set[str]] = {}  # self.<name> holding a backend, with its members
        funcs = [f for f in (cls.body if isinstance(cls, ast.ClassDef) else ast.walk(tree))
                 if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for f in funcs:
            for arg in f.args.posonlyargs + f.args.args + f.args.kwonlyargs:
                members = allowed(arg.annotation, f"{f.name}({arg.arg})")
                if members is None:
                    if arg.arg.endswith("backend") and arg.annotation is None:
                        why.append(f"{where}: {f.name}({arg.arg}) names no role of kit.cluster.backend")
                    continue
                uses(_attrs_of(f.body, lambda v, a=arg.arg: isinstance(v, ast.Name) and v.id == a),
                     members, arg.arg)
                for stmt in ast.walk(f):  # self.x = arg, or self.x, ... = arg, ...
                    if isinstance(stmt, ast.Assign):
                        for target in stmt.targets:
                            pairs = zip(target.elts, stmt.value.elts) if isinstance(target, ast.Tuple) and \
                                isinstance(stmt.value, ast.Tuple) else [(target, stmt.value)]
                            for t, v in pairs:
                                if isinstance(t, ast.Attribute) and isinstance(v, ast.Name) and v.id == arg.arg:
                                    fields[t.attr] = members
            for stmt in ast.walk(f):  # self.x: Role | None = ...
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Attribute):
                    members = allowed(stmt.annotation, f"self.{stmt.target.attr}")
                    if members is not None:
                        fields[stmt.target.attr] = members
        if isinstance(cls, ast.ClassDef):
            for name, members in fields.items():
                uses(_attrs_of(cls.body, lambda v, n=name: isinstance(v, ast.Attribute) and v.attr == n
                               and isinstance(v.value, ast.Name) and v.value.id == "self"), members, f"self.{name}")
    return sorted(set(why))


CALLERS = sorted(p for p in (ROOT / "kit").rglob("*.py") if "cluster" not in p.relative_to(ROOT / "kit").parts[:1])


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_each_caller_of_a_backend_names_the_roles_it_uses(path):
    assert check(path.read_text(), path.relative_to(ROOT).as_posix()) == []


def test_the_callers_name_their_roles_where_they_take_a_backend():
    """The modules handed a backend say so by role (not by the whole protocol)."""
    named = {p.relative_to(ROOT).as_posix(): sorted(n for n in protocols(ast.parse(p.read_text())))
             for p in CALLERS}
    assert named["kit/throttle/loop.py"] == ["Connection", "Overrides", "Reading", "ThrottledCluster", "Throttling"]
    assert named["kit/dashboard/poller.py"] == ["Connection", "PolledCluster", "Reading", "Throttling"]
    assert named["kit/throttle/sources.py"] == ["Metrics"]
    assert [m for m, names in named.items() if "ClusterBackend" in names] == \
        ["kit/runbook/environment.py"]  # the runbooks' opener (as open_backend) returns the whole backend


@pytest.mark.parametrize("source, says", [
    ("from kit.cluster.backend import ClusterBackend\ndef f(backend: ClusterBackend): backend.read()\n",
     "f(backend) takes the whole ClusterBackend"),
    ("from kit.cluster.backend import Reading\ndef f(backend: Reading): backend.apply([])\n",
     "backend.apply is in none of the roles"),
    ("from kit.cluster.backend import Reading\nclass C:\n    def __init__(self, b: Reading):\n"
     "        self.b, self.n = b, 1\n    def g(self): self.b.set_throttles()\n",
     "self.b.set_throttles is in none of the roles"),
    ("from kit.cluster.backend import Reading, Throttling\nfrom typing import Protocol\n"
     "class Both(Reading, Throttling, Protocol): ...\nclass C:\n    def __init__(self):\n"
     "        self.b: Both | None = None\n    def g(self): self.b.elect()\n",
     "self.b.elect is in none of the roles"),
    ("def f(backend, moves): backend.apply(moves)\n", "f(backend) names no role"),
])
def test_the_check_finds_a_caller_using_more_than_its_roles(source, says):
    assert any(says in line for line in check(source)), check(source)


def test_the_check_passes_a_caller_within_its_roles():
    source = ("from kit.cluster.backend import Connection, Reading\nfrom typing import Protocol\n"
              "class R(Connection, Reading, Protocol): ...\n"
              "def f(backend: R):\n    with backend: return backend.read(), backend.reached_through\n")
    assert check(source) == []
