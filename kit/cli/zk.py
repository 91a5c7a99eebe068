"""`kit zk start|stop|status`: a real ZooKeeper server on 127.0.0.1 for demos and tests
(kit.cluster.zk.server).
"""
# General flow:
# 1) add_parser declares `kit zk start|stop|status`, each running its own function below.
# 2) Each hands its data directory (and port) to kit.cluster.zk.server and prints one line;
#    status exits 1 when no server runs there.
from __future__ import annotations

import argparse

from kit.cli.lazy import lazy_module
from kit.cli.options import Parser

server = lazy_module("kit.cluster.zk.server")  # imported when used: see kit.cli.lazy


def add_parser(sub) -> None:
    """Register `kit zk` on the `kit` command's subparsers."""
    zk = sub.add_parser("zk", help="start, stop or check a local ZooKeeper server (127.0.0.1)",
                        description="A real ZooKeeper server on the loopback interface, for demos and tests.",
                        epilog="examples:\n  kit zk start --port 2181 --data build/zk\n  kit zk status --data build/zk\n"
                               "  kit zk stop --data build/zk",
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ops = zk.add_subparsers(dest="zk_command", metavar="start|stop|status", required=True, parser_class=Parser)
    for name, text, fn in (("start", "start a server", zk_start),
                           ("stop", "stop the server started from --data", zk_stop),
                           ("status", "say whether it runs and where", zk_status)):
        p = ops.add_parser(name, help=text, description=text)
        p.add_argument("--data", default="build/zk", metavar="DIR", help="data directory (default build/zk)")
        if name == "start":
            p.add_argument("--port", type=int, default=2181, metavar="P", help="client port (default 2181)")
        p.set_defaults(run=fn)


def zk_start(a) -> int:
    """`kit zk start`: a server on 127.0.0.1:PORT with its data in --data."""
    z = server.start(a.port, a.data)
    print(f"ZooKeeper running on {z.connect} (pid {z.pid}, data {z.data})")
    return 0


def zk_stop(a) -> int:
    """`kit zk stop`: the server started from --data stops."""
    print("stopped" if server.stop(a.data) else f"no ZooKeeper started by kit from {a.data}")
    return 0


def zk_status(a) -> int:
    """`kit zk status`: whether a server started from --data runs (exit 1 if not) and where."""
    z = server.status(a.data)
    if z is None:
        print(f"not running (data {a.data})")
        return 1
    print(f"running on {z.connect} (pid {z.pid}, data {z.data})")
    return 0
