"""The runbooks kit ships: where they are, and what each one's parameters cell declares."""
from __future__ import annotations

import ast
import contextlib
import functools
import json
from pathlib import Path

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"


@functools.lru_cache(maxsize=None)
def declared_defaults(runbook: str) -> dict:
    """The default of each parameter the runbook's parameters cell declares (`name: type =
    value  # help`, the cell papermill fills in), read without running it; {} for a runbook
    kit does not ship (a copy of one saved elsewhere)."""
    try:
        with open(RUNBOOKS / f"{runbook}.ipynb", encoding="utf-8") as fh:
            cells = json.load(fh)["cells"]
        source = next("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
        tree = ast.parse(source)
    except (OSError, ValueError, KeyError, StopIteration, SyntaxError):
        return {}
    out = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign)
                                                                      and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and node.value is not None:
            with contextlib.suppress(ValueError, TypeError, SyntaxError):
                out[target.id] = ast.literal_eval(node.value)
    return out
