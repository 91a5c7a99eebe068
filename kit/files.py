"""Files kit reads and writes, whatever is in them: bounded reads, atomic writes, outputs
checked before any work.

Light on purpose (no numpy, no YAML): the command line checks its outputs with it before
anything else is imported, and kit's state files (the simulated clock, faults, records) are
written with it.
"""
from __future__ import annotations

import json
import os
import stat
import tempfile

from kit.errors import BadInput

# A 1,000,000-partition snapshot is about 150 MB; anything past this is not a cluster.
MAX_INPUT_BYTES = 1 << 30


def read_input(path: str, what: str, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of an input file (a regular file or a pipe), at most `max_bytes`; `BadInput`
    names the file when it is missing, a directory, a device, unreadable or too large."""
    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISFIFO(info.st_mode)):
                raise BadInput(f"{what} {path}: not a regular file")
            # Asked for its own size first (a pipe's is 0): a read of `max_bytes` allocates
            # them all and gives back the rest (a 30 MB snapshot: 18 -> 6 CPU ms); the file's
            # bytes past that size, if it grew, are read after.
            size = min(info.st_size, max_bytes) if stat.S_ISREG(info.st_mode) else 0
            raw = f.read(size + 1)
            if len(raw) > size:
                raw += f.read(max_bytes + 1 - len(raw))
    except FileNotFoundError:
        raise BadInput(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{what} {path}: is a directory") from None
    except OSError as e:
        raise BadInput(f"{what} {path}: cannot read ({e.strerror or e})") from None
    if len(raw) > max_bytes:
        raise BadInput(f"{what} {path}: larger than {max_bytes >> 20} MiB")
    return raw


def same_file(a: str, b: str) -> bool:
    """Whether two spellings name one file (symlinks, `./`, hard links: inodes compared)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist yet: compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


def check_output(flag: str, path: str, inputs: dict[str, str | None] | None = None) -> None:
    """`BadInput` unless `path` can take an output without harm, checked before any work:
    its directory exists, it is not a directory, and it is none of `inputs` (option -> path)."""
    if os.path.isdir(path):
        raise BadInput(f"{flag} {path}: is a directory")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise BadInput(f"{flag} {path}: no such directory {directory}")
    for in_flag, in_path in (inputs or {}).items():
        if in_path and same_file(path, in_path):
            raise BadInput(f"{flag} {path}: is the input {in_flag} {in_path}; outputs never overwrite inputs")


def read_json_object(path: str) -> dict | None:
    """The JSON object in the file at `path`, or None when the file is missing, unreadable, not
    JSON or not an object: kit's own state files (records, markers, the simulated clock), which
    a reader meets half-written or not yet written, and treats as absent."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def write_atomic(path: str, text: str) -> None:
    """Write a file so that readers never see half of it: a regular file is replaced by a
    rename; a symlink's target is the file written; a device or a pipe (/dev/null,
    /dev/stdout) is written through, never replaced."""
    path = os.path.realpath(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "w") as f:
            f.write(text)
        return
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".kit-", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
