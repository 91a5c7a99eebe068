"""Extension modules a command will import, their shared libraries loaded ahead on a thread
of their own (`ahead`), while the command's own thread reads its input.

Loading a large extension is mostly the dynamic loader's work (mapping, relocating and
initialising the library and those it needs: OR-Tools' min-cost flow brings libortools,
Abseil and protobuf, 45-65 of the 57-78 ms its import takes on this project's machine). The
thread calls the C library's `dlopen` as a ctypes foreign function, which ctypes calls
without the GIL, so on a second core the load overlaps the reading of the snapshot
(`ctypes.CDLL` would hold the GIL through its `dlopen`, stopping the command's own thread for
the whole load). The loader maps one library at a time, and a new thread needs its lock too:
an extension the command's thread imports meanwhile, or a thread it starts, waits for the
load, so a command starts this one after its own threads and its reader's import.
The later import finds the libraries loaded and only initialises its module. What is loaded
is what the import loads anyway, so nothing the command computes changes; a library that is
not found, or fails to load, is left to the import, which then fails or succeeds as before.
"""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
import sys
import threading


def library_path(module: str) -> str | None:
    """The file of the extension module `module` (dotted), found without importing any of its
    packages (a package's __init__ would run on the other thread, holding the GIL); None when
    there is none."""
    top, *rest = module.split(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations or not rest:
        return None
    for base in spec.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(base, *rest[:-1], rest[-1] + suffix)
            if os.path.isfile(path):
                return path
    return None


def ahead(modules: tuple[str, ...]) -> threading.Thread | None:
    """Load the shared libraries of the extension `modules` on a daemon thread, started now
    (after any fork: `second_core.second_process` forks first); the thread, or None when none
    was found."""
    paths = [p for p in map(library_path, modules) if p is not None]
    if not paths:
        return None
    thread = threading.Thread(target=_load, args=(paths,), name="kit-preload", daemon=True)
    thread.start()
    return thread


def _load(paths: list[str]) -> None:
    dlopen = _dlopen()
    if dlopen is None:
        return  # the import loads them
    for path in paths:
        if not dlopen(os.fsencode(path), sys.getdlopenflags()):  # the flags the import uses
            return  # the import will say why, if it is made


def _dlopen():
    """The C library's `dlopen` as a ctypes foreign function (called without the GIL), or None
    where the running program does not export one."""
    try:
        dlopen = ctypes.CDLL(None).dlopen
    except (OSError, AttributeError, TypeError):
        return None
    dlopen.argtypes = (ctypes.c_char_p, ctypes.c_int)
    dlopen.restype = ctypes.c_void_p
    return dlopen
