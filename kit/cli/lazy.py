"""Modules named at the top of a command module but imported when first used.

`kit` builds the parser of every command before it runs one, so whatever the command modules
import at their top, `kit --help` and every command load. Imported eagerly, the libraries they
hand over to (ZooKeeper through kazoo, the simulator, the runbooks, the doctor, the figures)
made `kit --help` half as slow again (0.30 s of CPU to 0.45 s), and the planner (SciPy and
OR-Tools) would add almost a second more. So each command module names those libraries at its
top with `lazy_module`, and a library is imported by the first call into it; so is anything that
loads numpy (kit.formats, kit.throttle.decide, the report), which no help text needs. kit's light
core (errors, files, events, progress, text, validate), which `kit --help` loads anyway, is
imported as usual; tests/test_imports.py checks that every `kit ... --help` stays that light.
"""
from __future__ import annotations

import importlib
from types import ModuleType


class LazyModule:
    """Stands for the module `name`: the first attribute read imports it (a plain import, so
    its errors are the import's own); every read after that is the module's attribute."""

    def __init__(self, name: str):
        self.__name__ = name

    def __getattr__(self, attr: str):
        module: ModuleType = importlib.import_module(self.__name__)
        return getattr(module, attr)

    def __repr__(self) -> str:
        return f"<module {self.__name__!r}, imported when first used>"


def lazy_module(name: str) -> LazyModule:
    """The module `name` (dotted, absolute), imported when first used."""
    return LazyModule(name)
