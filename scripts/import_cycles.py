"""Import cycles among kit's own modules (kit/), imports inside functions included.

Reads the source only (no import runs). An edge A -> B is an `import` or `from ... import` in
A naming B, or naming a module inside package B (importing kit.a.b runs kit/a/__init__.py
first). Prints each cycle (a strongly connected component) with the lines that close it;
exits 1 when there is one.

    python scripts/import_cycles.py [REPO]
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under kit/."""
    out = {}
    for path in sorted(root.glob("kit/**/*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {module it imports: the line of the first such import}."""
    def owner(name: str) -> str | None:  # the longest dotted prefix that is a module of ours
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {m: {} for m in mods}
    for m, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                target = owner(name)
                if target and target != m:
                    graph[m].setdefault(target, node.lineno)
                package = target.rpartition(".")[0] if target else ""
                while package:  # its packages run first, unless m is inside them
                    if package in mods and not (m + ".").startswith(package + "."):
                        graph[m].setdefault(package, node.lineno)
                    package = package.rpartition(".")[0]
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else Path(__file__).resolve().parents[1])
    mods = modules(root)
    graph = import_graph(mods)
    found = cycles(graph)
    for component in found:
        print("cycle:", ", ".join(component))
        for a in component:
            for b, line in sorted(graph[a].items()):
                if b in component:
                    print(f"    {a} -> {b}  ({mods[a].relative_to(root)}:{line})")
    print(f"{len(found)} import cycle(s) among {len(mods)} modules")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
