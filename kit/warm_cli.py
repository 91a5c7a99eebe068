"""A warm `kit` command line for test suites: one process that has imported kit once and forks
a child for each command (`kit.testing.run_kit` uses it).

A test suite runs the `kit` command hundreds of times; each run started from nothing spends
most of its CPU on the interpreter and on importing numpy, kazoo and kit (~0.4 of ~0.55 CPU s
for `kit status --zk` on this project's machine). Here one process (`serve`, started with
``python -m kit.warm_cli SOCKET``) imports them once and forks a child per command: the child is
a process of its own, with the caller's arguments, environment, working directory, stdout and
stderr, that runs `kit.cli.main` as the console script does and exits with its code. Only the
imports are shared, and only those that change nothing a command decides (`PRELOAD`: never
numba, whose presence switches the planner to its compiled kernels, `kit.jit.numba_loaded`).

The protocol, one connection per command over a Unix socket: the caller sends one JSON line
(args, env, cwd) with its stdout and stderr files as descriptors (SCM_RIGHTS); the child
answers ``{"pid": N}`` at once and ``{"exit": code}`` when its interpreter has finished (its
threads joined, its atexit handlers run). A child killed by a signal closes the connection
without an exit code (the caller says -9, SIGKILL, whichever signal it was).
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from kit import jit

# Imported once by the server, before any fork: the command line and the libraries most
# commands load. None of them starts a Python thread (a fork copies only the calling thread);
# numpy's OpenBLAS starts a pool, which OpenBLAS itself shuts down around a fork.
PRELOAD = ("numpy", "kazoo.client", "kit.cli", "kit.formats", "kit.cluster.zk.backend", "kit.sim.controller")
# The same for `kit run` (kit.runbook.runner and record), when the `notebooks` extra is
# installed: the kernel's client and nbconvert, 0.62 CPU s of imports a run. Not papermill
# (0.14 s more): it imports pyarrow, whose allocator starts a thread of its own.
PRELOAD_IF_INSTALLED = ("jupyter_client.manager", "jupyter_client.kernelspec", "nbformat", "nbconvert",
                        "nbconvert.preprocessors")


def serve(path: str) -> None:
    """Listen on the Unix socket `path` and fork a child per connection, until killed."""
    for name in PRELOAD:
        importlib.import_module(name)
    for name in PRELOAD_IF_INSTALLED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # kit run then says which extra it needs, as without the server
    if jit.numba_loaded():  # would change the planner's path in every child
        raise SystemExit("kit.warm_cli: numba was loaded by the preloads")
    from kit.cli import build_parser

    build_parser()  # the command modules it imports
    # What the server holds is left out of a child's garbage collections: without this a full
    # collection (the interpreter runs one as it exits) visits every object the imports made, and
    # so copies every page they sit on. `kit
    # --version` took 0.08-0.10 CPU s a child before, 0.02-0.04 after; a `kit plan replace` of
    # 3,000 partitions 0.17-0.20 before, 0.14-0.16 after (process accounting).
    gc.freeze()
    # The children are not waited for here: the kernel reaps them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            _child(conn)  # never returns
        conn.close()


def _child(conn: socket.socket) -> None:
    """Become the command the connection asks for, then exit as it does."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the command waits for its own children
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
    request = json.loads(msg)
    stdin = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((stdin, 0), (fds[0], 1), (fds[1], 2)):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["kit", *request["args"]]
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    exit_code = [1]

    def report() -> None:
        # Registered before the command runs, so it runs after every atexit handler the command adds.
        conn.sendall(json.dumps({"exit": exit_code[0]}).encode() + b"\n")

    atexit.register(report)
    from kit.cli import main

    try:
        code = main()
    except SystemExit as e:
        code = e.code
    except BaseException:  # as the interpreter does: the traceback on stderr, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    exit_code[0] = code
    sys.exit(code)


# The caller's side: one server per process, started on first use.
_lock = threading.Lock()
_server: dict = {}
# Seconds for the server's imports on a loaded machine before the caller gives up on it (and
# runs its commands cold); and for a killed child's connection to close.
START_S = 120.0
KILL_S = 30.0


def run(args: list[str], env: dict | None = None, timeout: float = 120, cwd=None) -> subprocess.CompletedProcess | None:
    """`kit *args` in a child of the warm server, as `subprocess.run(..., capture_output=True,
    text=True)` would run the console script; None when no server could be started (the
    caller then runs the command cold).

    Raises
    ------
    subprocess.TimeoutExpired
        The command ran past `timeout` seconds; it was killed.
    """
    path = _server_path()
    if path is None:
        return None
    request = {"args": list(args), "env": dict(os.environ if env is None else env), "cwd": os.fspath(cwd or os.getcwd())}
    cmd = ["kit", *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode()], [out.fileno(), err.fileno()])
        conn.settimeout(timeout)
        replies = conn.makefile("rb")
        pid, code = None, None
        try:
            pid = json.loads(replies.readline())["pid"]
            line = replies.readline()
            code = json.loads(line)["exit"] if line else None
        except (TimeoutError, socket.timeout):
            if pid is not None:
                _kill(pid)
            conn.settimeout(KILL_S)
            with contextlib.suppress(TimeoutError, socket.timeout):
                while conn.recv(4096):  # until the killed child's end closes the connection
                    pass
            raise subprocess.TimeoutExpired(cmd, timeout, _text(out), _text(err)) from None
        if code is None:
            # Ended by a signal: the connection closed with no exit code. The server does not
            # wait for its children, so which signal is not known: said as SIGKILL.
            code = -signal.SIGKILL
        return subprocess.CompletedProcess(cmd, code, _text(out), _text(err))


def _text(f) -> str:
    """A child's output as text mode reads it (the locale's encoding, universal newlines)."""
    f.seek(0)
    return io.TextIOWrapper(io.BytesIO(f.read())).read()


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _server_path() -> str | None:
    """The socket of this process's server, started if needed; None if it would not start."""
    with _lock:
        if _server.get("owner") == os.getpid():
            proc = _server.get("proc")
            if proc is None:
                return None  # it would not start: cold from now on
            if proc.poll() is None:
                return _server["path"]
        folder = tempfile.mkdtemp(prefix="kit-warm-")
        path = os.path.join(folder, "socket")
        # -P: no working directory on sys.path, as for the console script.
        proc = subprocess.Popen([sys.executable, "-P", "-m", "kit.warm_cli", path], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        said: list[bytes] = []
        reader = threading.Thread(target=lambda: said.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_S)
        if said != [b"ready\n"]:
            proc.kill()
            proc.wait()
            shutil.rmtree(folder, ignore_errors=True)
            _server.update(owner=os.getpid(), proc=None, path=None)
            return None
        _server.update(owner=os.getpid(), proc=proc, path=path)
        atexit.register(_stop, proc, folder)
        return path


def _stop(proc: subprocess.Popen, folder: str) -> None:
    proc.kill()
    proc.wait()
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    serve(sys.argv[1])
