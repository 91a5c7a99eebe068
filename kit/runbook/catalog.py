"""The runbooks kit ships: where they are, their names and the parameters each declares.

The notebooks are package data (`kit/runbooks`, a link to the repository's `runbooks/` in a
checkout; real files in an installed wheel), found with importlib.resources, so `kit run`
works from any directory and from a non-editable install. Reading the parameters needs no
papermill (about a second to import, every notebook inspected took `kit run` 4.6 s): the
parameters cell is read with json and parsed by papermill's own rules for Python notebooks
(`papermill.translators.PythonTranslator.inspect`), which the tests hold the two to.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import json
import re
from importlib import resources
from pathlib import Path

from kit.errors import BadInput

# The installed package's folder (a checkout's kit/runbooks links to runbooks/). Not a zip:
# papermill, the simulated clusters and the kernel read these as files.
RUNBOOKS = Path(str(resources.files("kit") / "runbooks"))
# Parameters `kit run` fills in itself: not listed, not accepted with -p.
RESERVED = ("record_path",)

# papermill's PythonTranslator.PARAMETER_PATTERN (papermill 2.x): NAME[: TYPE] = VALUE  # [type: T] HELP
_PARAMETER = re.compile(
    r"^(?P<target>\w[\w_]*)\s*(:\s*[\"']?(?P<annotation>\w[\w_\[\],\s]*)[\"']?\s*)?=\s*(?P<value>.*?)"
    r"(\s*#\s*(type:\s*(?P<type_comment>[^\s]*)\s*)?(?P<help>.*))?$")


def available() -> list[str]:
    """The runbooks' names (runbooks/NAME.ipynb), sorted."""
    return sorted(p.stem for p in RUNBOOKS.glob("*.ipynb"))


def runbook_path(name: str) -> Path:
    """runbooks/NAME.ipynb; BadInput (one line naming the runbooks) when there is none."""
    path = RUNBOOKS / f"{name}.ipynb"
    if "/" in name or not path.is_file():
        raise BadInput(f"no runbook {name!r} (runbooks: {', '.join(available())})")
    return path


def declared_parameters(path: Path) -> dict[str, dict]:
    """The runbook's parameters cell as papermill reads it: name -> {type, default, help}, in
    the cell's order; {} without a cell tagged "parameters"."""
    with open(path, encoding="utf-8") as fh:
        nb = json.load(fh)
    cell = next((c for c in nb.get("cells", []) if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        return {}
    source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
    out = {}
    for definition in _definitions(source):
        m = _PARAMETER.match(definition)
        if m is None or m["target"] is None:
            continue
        kind = str(m["annotation"] or m["type_comment"] or None)
        out[m["target"].strip()] = {"type": kind.strip(), "default": str(m["value"]).strip(),
                                    "help": str(m["help"] or "").strip()}
    return out


def _definitions(source: str) -> list[str]:
    """The cell's assignments, a multi-line value joined onto one line with only its last
    line's comment kept (the help), as papermill groups them."""
    groups, lines = [], []
    for line in source.splitlines():
        if not line.strip() or line.strip().startswith("#"):
            continue
        equals = line.count("=")
        if equals:
            groups.append(_flatten(lines))
            lines = []
            if equals > 1:  # papermill skips a line it cannot read as one assignment
                continue
        lines.append(line)
    groups.append(_flatten(lines))
    return [g for g in groups if g]


def _flatten(lines: list[str]) -> str:
    head = "".join((line[:line.index("#")] if "#" in line else line).strip() for line in lines[:-1])
    return head + (lines[-1].strip() if lines else "")


@functools.lru_cache(maxsize=None)
def declared_defaults(runbook: str) -> dict:
    """The default value of each parameter the runbook declares (`declared_parameters`, read
    as Python literals); {} for a runbook kit does not ship (a copy of one saved elsewhere)."""
    try:
        declared = declared_parameters(RUNBOOKS / f"{runbook}.ipynb")
    except (OSError, ValueError):
        return {}
    out = {}
    for name, parameter in declared.items():
        with contextlib.suppress(ValueError, TypeError, SyntaxError):
            out[name] = ast.literal_eval(parameter["default"])
    return out
