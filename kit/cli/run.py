"""`kit run [NAME]`: a runbook executed with papermill into an incident record
(kit.runbook.runner); without NAME, the runbooks and their parameters.
"""
# General flow:
# 1) add_parser declares `kit run`.
# 2) Without NAME: list each runbook (kit.runbook.catalog: json and the parameters cell's own
#    comments, no papermill, so the list takes no more than `kit --help`) with the parameters its
#    notebook declares, leaving out those kit fills in itself.
# 3) With NAME: kit.runbook.runner.run executes runbooks/NAME.ipynb into --record-dir with its
#    parameters; the outcome line (kit.runbook.steps.outcome_line) and the record's files are
#    printed, and the runbook's exit code returned (130 / 143 when SIGINT / SIGTERM stopped it).
from __future__ import annotations

from kit.cli.lazy import lazy_module
from kit.cli.options import command, rate

catalog = lazy_module("kit.runbook.catalog")  # imported when used: see kit.cli.lazy
runner = lazy_module("kit.runbook.runner")
steps = lazy_module("kit.runbook.steps")


def add_parser(sub) -> None:
    """Register `kit run` on the `kit` command's subparsers."""
    p = command(sub, "run", "run a runbook with papermill into an incident record",
                "Execute runbooks/NAME.ipynb into RECORD_DIR/<timestamp>-NAME.ipynb with an .html and a JSON record "
                "beside it. Exit 0 succeeded (or planned only), 3 stopped at a pre-check, 4 doctor's alert, 1 failed, "
                "130/143 interrupted by SIGINT/SIGTERM (every process the run started is stopped; the record says "
                "what the cluster was left with and the command that continues or undoes it). Without NAME: "
                "list the runbooks and their parameters.",
                "kit run broker_replacement -p apply true -p replace 1003:1013 --record-dir records")
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
                   help="a parameter; VALUE is read as the runbook declares it (YAML for lists, dicts, numbers)")
    p.add_argument("-f", "--parameters-file", action="append", default=[], metavar="params.yaml")
    p.add_argument("--record-dir", default="records", metavar="DIR")
    p.add_argument("--hide-input", action="store_true", help="leave the code out of the HTML record")
    p.add_argument("--timeout", type=rate, metavar="S", help="give up on a cell after S seconds")
    p.set_defaults(run=run)


def run(a) -> int:
    """`kit run`: the runbook's record and its exit code, or the list of runbooks."""
    if not a.name:
        for name in catalog.available():
            print(name)
            for key, d in catalog.declared_parameters(catalog.runbook_path(name)).items():
                if key not in catalog.RESERVED:
                    print(f"  {key}: {d['type']} = {d['default']}  # {d['help']}")
        return 0
    code, record = runner.run(a.name, [tuple(x) for x in a.parameter], a.parameters_file, a.record_dir,
                              a.hide_input, a.timeout)
    # The outcome with its fail-safe caveat, as the record's headline says it.
    print(f"{a.name}: {steps.outcome_line(record)}" + (f" ({record['reason']})" if record.get("reason") else ""))
    for key in ("notebook", "html"):
        if record.get(key):
            print(f"  {key}: {record[key]}")
    print(f"  record: {record['json']}")
    return code
