"""What the `kit` commands share: the parser class, argument types and option groups.

An argument type turns one command-line word into a value or raises
argparse.ArgumentTypeError, which argparse reports as a one-line usage error (exit 2).
"""
from __future__ import annotations

import argparse
import math
import sys

from kit import validate
from kit.cli.lazy import lazy_module
from kit.errors import BadInput
from kit.files import check_output

# Imported when used (see kit.cli.lazy): it loads numpy.
decide = lazy_module("kit.throttle.decide")
backends = lazy_module("kit.cluster.backend")  # imported when used: see kit.cli.lazy


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2.

    `declare(parser)`, when given, adds the parser's arguments the first time it parses or
    shows its help: a command whose arguments come from a module that is slow to import
    (`kit plan`'s, from kit.plan) costs nothing to the other commands and to `kit --help`.
    """

    def __init__(self, *args, declare=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.declare = declare

    def declared(self) -> Parser:
        """This parser with its deferred arguments added (once)."""
        if self.declare is not None:
            declare, self.declare = self.declare, None
            declare(self)
        return self

    def parse_known_args(self, args=None, namespace=None):
        self.declared()
        return super().parse_known_args(args, namespace)

    def format_usage(self) -> str:
        self.declared()
        return super().format_usage()

    def format_help(self) -> str:
        self.declared()
        return super().format_help()

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


# --------------------------------------------------------------------------- argument types


def broker_id(text: str, special: tuple[int, ...] = ()) -> int:
    """A broker id within Kafka's 0..INT32_MAX, or one of the `special` values."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids, got {text.strip()[:40]!r}") from None
    if n in special:
        return n
    if not 0 <= n <= validate.INT32_MAX:
        raise argparse.ArgumentTypeError(f"broker id {n} is outside Kafka's 0..{validate.INT32_MAX}")
    return n


def broker_ids(text: str) -> list[int]:
    """Comma-separated broker ids."""
    out = [broker_id(x) for x in text.split(",") if x.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected at least one broker id")
    return out


def target_ids(text: str) -> list[int]:
    """--brokers: broker ids, or topicmappr's -1 (the selected topics' brokers) and -2 (every live one)."""
    out = [broker_id(x, special=(-1, -2)) for x in text.split(",") if x.strip()]
    if not out:
        raise argparse.ArgumentTypeError("expected at least one broker id")
    return out


def broker_pairs(text: str) -> list[tuple[int, int]]:
    """OLD:NEW[,OLD:NEW]: broker ids in pairs."""
    out = []
    for item in text.split(","):
        try:
            old, new = item.split(":")
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected OLD:NEW[,OLD:NEW], got {item[:40]!r}") from None
        out.append((broker_id(old), broker_id(new)))
    return out


def whole(minimum: int):
    """An argument type: a whole number of at least `minimum`."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected at least {minimum}, got {n}")
        return n
    return parse


def number(text: str, expected: str = "a number") -> float:
    """`text` as a float, or the option's one-line error naming what was `expected`."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def rate(text: str) -> float:
    """A finite positive number (seconds, factors, speeds)."""
    x = number(text)
    if not math.isfinite(x) or not x > 0:
        raise argparse.ArgumentTypeError(f"expected a positive rate, got {text!r}")
    return x


def load_share(text: str) -> float:
    """A share of capacity, 0 <= F < 1 (client load)."""
    x = number(text, "a share such as 0.5")
    if not 0 <= x < 1:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"expected a share from 0 up to (not including) 1, got {text!r}")
    return x


def bytes_per_second(text: str) -> float:
    """A replication rate Kafka can hold (1 B/s to a long's maximum)."""
    try:
        return validate.rate(float(text), "rate")
    except (ValueError, BadInput):
        raise argparse.ArgumentTypeError(f"expected bytes per second from 1 to {validate.LONG_MAX}, "
                                         f"got {text!r}") from None


# --------------------------------------------------------------------------- commands and option groups


def command(sub, name: str, help_text: str, description: str, example: str):
    """A subcommand whose --help ends with an example."""
    return sub.add_parser(name, help=help_text, description=description, epilog=f"example:\n  {example}",
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def writable(flag: str, path: str, **inputs: str | None) -> None:
    """BadInput unless `path` can be written as a file and is none of the command's inputs
    (given as option=path, e.g. snapshot=a.snapshot); checked before any work is done."""
    check_output(flag, path, {f"--{k.replace('_', '-')}": v for k, v in inputs.items()})


def zk_auth_option(p) -> None:
    """--zk-auth-file | --zk-auth (main reads the file into a.zk_auth before the command runs)."""
    auth = p.add_mutually_exclusive_group()
    auth.add_argument("--zk-auth-file", metavar="FILE",
                      help="file whose first line is the ZooKeeper auth SCHEME:CREDENTIALS, e.g. "
                           "digest:user:password (default: $KIT_ZK_AUTH_FILE, then $KIT_ZK_AUTH); never printed")
    auth.add_argument("--zk-auth", metavar="SCHEME:CREDENTIALS",
                      help="ZooKeeper auth on the command line (visible in ps: prefer --zk-auth-file or $KIT_ZK_AUTH)")


def auto_throttle_options(p) -> None:
    """The auto-throttle's settings, as `kit throttle run` and `kit simulate --throttle auto` take them."""
    g = p.add_argument_group("auto-throttle")
    g.add_argument("--interval", type=rate, default=30.0, metavar="S", help="seconds between decisions (default 30)")
    g.add_argument("--share", type=float, default=0.9, metavar="F",
                   help="share of the capacity clients leave free that replication may take (default 0.9)")
    g.add_argument("--min-rate", type=bytes_per_second, default=10e6, metavar="BYTES_PER_SEC",
                   help="the floor, and the fail-safe rate when metrics are missing (default 10 MB/s)")
    g.add_argument("--change-threshold", type=float, default=0.10, metavar="F",
                   help="skip rate changes smaller than this share (default 0.10)")
    g.add_argument("--stale-intervals", type=whole(1), default=2, metavar="N",
                   help="metrics older than N intervals: fail safe to the minimum rate (default 2)")
    g.add_argument("--cap-map", metavar="JSON|FILE",
                   help='network capacity by instance type in MB/s, e.g. \'{"standard": 125}\' '
                        "(default: each broker's net_capacity)")
    g.add_argument("--events", metavar="FILE", help="append every decision to this JSON-lines file")


def throttle_settings(a) -> decide.Settings:
    """The auto-throttle's Settings from the options auto_throttle_options declared."""
    return decide.Settings(interval=a.interval, share=a.share, minimum=a.min_rate,
                           change_threshold=a.change_threshold, stale_intervals=a.stale_intervals)


def cluster_options(p, group=None, required: bool = True) -> None:
    """--zk | --bootstrap (in `group` when given, e.g. beside --snapshot), with each one's
    credentials: --zk-auth-file / --zk-auth and --zk-connect-timeout, and --command-config.
    `cluster_address` reads them."""
    where = group if group is not None else p.add_mutually_exclusive_group(required=required)
    where.add_argument("--zk", metavar="HOST:PORT[/chroot]", help="Kafka's ZooKeeper (ZooKeeper-mode clusters)")
    where.add_argument("--bootstrap", metavar="HOST:PORT[,HOST:PORT]",
                       help="Kafka's brokers, through the Admin API (KRaft clusters; see docs/admin-api.md)")
    zk_auth_option(p)
    p.add_argument("--zk-connect-timeout", type=rate, metavar="S",
                   # The default said is kit.cluster.backend.DEFAULT_TIMEOUT's (not imported here: it
                   # stays lazy); tests/cluster/test_zookeeper.py holds the two together.
                   help="with --zk: seconds to wait for ZooKeeper to answer when connecting, as Kafka's "
                        "zookeeper.connection.timeout.ms (default 10)")
    p.add_argument("--command-config", metavar="FILE",
                   help="with --bootstrap: Kafka client properties (security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.*, request.timeout.ms, default.api.timeout.ms), as Kafka's own "
                        "tools take them (default: $KIT_KAFKA_COMMAND_CONFIG); never printed")
    p.add_argument("--sim-facts", metavar="FILE",
                   help="with --bootstrap on the simulated KRaft cluster only: its DIR/facts.json (kit sim start "
                        "--kraft), the brokers' NIC capacities and instance types Kafka does not say")


def cluster_address(a) -> backends.ClusterAddress:
    """The cluster `cluster_options`' arguments name (`kit.cluster.backend.ClusterAddress`, which
    refuses options that do not go together: one cluster's credentials with the other's address)."""
    return backends.ClusterAddress(zk=getattr(a, "zk", None), bootstrap=getattr(a, "bootstrap", None),
                                   auth=getattr(a, "zk_auth", None),
                                   command_config=getattr(a, "command_config", None),
                                   sim_facts=getattr(a, "sim_facts", None),
                                   zk_connect_timeout=getattr(a, "zk_connect_timeout", None))


def cluster_flag(a) -> str:
    """The cluster's address as given ("--zk HOST:PORT/chroot" or "--bootstrap HOST:PORT"), for
    the commands kit suggests next."""
    return f"--bootstrap {a.bootstrap}" if getattr(a, "bootstrap", None) else f"--zk {a.zk}"
