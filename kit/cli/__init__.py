"""The `kit` command: parse, call one function, print, set the exit code.

One module per command (kit/cli/<command>.py, COMMANDS): its `add_parser(sub)` declares the
command and names the function that runs it (`set_defaults(run=...)`); `main` builds the
parser of the command asked for and calls that function.

Exit codes: 0 success, 1 a wait that ended without what it waited for (kit.errors.Stuck, or
not done), 2 bad input (one line on stderr, nothing written), 3 a request that cannot be
carried out safely (nothing written), 4 the doctor alerts (no plan), 130 Ctrl-C (one line on
stderr; a command that writes or changes something says what it left).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from kit import __version__, collector

# The command modules' imports make thousands of objects and no garbage: the collector's scans
# of them (11 young ones, 4-10 ms of a small `kit plan` on a loaded machine) wait until they
# are in, as do those of the options' declaration and of the other command modules, imported
# when the parser is built (`main`), and of `kit plan` (kit.cli.plan.run).
with collector.paused():
    from kit.cli import plan
    from kit.cli.lazy import lazy_module
    from kit.cli.options import Parser
    from kit.errors import INTERRUPTED, BadInput, Stuck, Unsafe

backend = lazy_module("kit.cluster.backend")  # imported when used: see kit.cli.lazy

TOP_EXAMPLES = plan.EXAMPLES + """  kit run broker_replacement -p zk zk1:2181/kafka -p apply true     (a runbook, into records/)
  kit apply plan.json --zk zk1:2181/kafka --throttle 10000000 --rollback-out rollback.json
  kit throttle run --zk zk1:2181/kafka --metrics-znode --cap-map '{"*": 125}' --events events.jsonl
  kit doctor --zk zk1:2181/kafka --out heal.json
  kit dashboard --zk zk1:2181/kafka --events events.jsonl --records records
"""

# The command modules (kit/cli/<module>.py), in the order `kit --help` lists them, each with
# the commands its `add_parser` declares.
COMMANDS = {
    "plan": ("plan",),
    "change": ("snapshot", "apply", "verify", "elect", "rollback", "status"),
    "sim": ("simulate", "sim"),
    "zk": ("zk",),
    "doctor": ("doctor",),
    "dashboard": ("dashboard",),
    "metrics": ("metrics",),
    "throttle": ("throttle",),
    "run": ("run",),
}
MODULE_OF = {command: module for module, commands in COMMANDS.items() for command in commands}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `kit` command's parser: every command of COMMANDS, each with its `run` default; or,
    given one of them, only the commands of its module.

    `main` builds only the command it runs: importing the other modules and declaring their
    options cost a `kit plan` some 0.05 CPU s of its start (0.15 -> 0.10 s for kit.cli, kit.plan
    and the parse, medians of 15 alternating runs), and a command parses its own words alone,
    so what it accepts, prints and refuses is the same either way.
    """
    parser = Parser(prog="kit", description="kit: operations kit for Apache Kafka.", epilog=TOP_EXAMPLES,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    modules = [MODULE_OF[command]] if command in MODULE_OF else list(COMMANDS)
    for name in modules:
        importlib.import_module(f"kit.cli.{name}").add_parser(sub)
    return parser


# OpenBLAS's thread pool, started when numpy loads: kit does no BLAS work (its matrix
# products are integer, which numpy does without BLAS), yet the pool's second thread cost a
# `kit plan` some 0.14 CPU s of its 0.58 (3,000-partition rebuild, medians of 9 alternating
# runs) and numpy's import 0.07 s. Set before anything loads numpy; a value the user set wins.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kit` command, on `argv` (None: the process's own arguments; the
    process then ends with the command, and what is alive at its end is spared the collector's
    last scans, `kit.collector.spared_at_exit`)."""
    os.environ.setdefault(*BLAS_THREADS)
    # Declaring every command's options: 7-10 young scans more, 3-7 ms (see the imports above).
    with collector.paused():
        words = sys.argv[1:] if argv is None else argv
        # The first word names the command when it is not an option (`kit --help`, `kit -h
        # plan`: every command).
        a = build_parser(words[0] if words else None).parse_args(words)
    try:
        if getattr(a, "zk_auth_file", None):
            a.zk_auth = backend.read_auth_file(a.zk_auth_file)
        return a.run(a)
    except (BadInput, Unsafe, Stuck) as e:  # each backend turns its library's errors into these
        sys.stderr.write(f"kit: {e}\n")
        return e.exit_code
    except KeyboardInterrupt:  # what a command does not say itself (kit plan, apply, rollback, verify do)
        sys.stderr.write("kit: interrupted (Ctrl-C)\n")
        return INTERRUPTED
    finally:
        if argv is None:  # the process's own command line: the process ends with this command
            collector.spared_at_exit()
