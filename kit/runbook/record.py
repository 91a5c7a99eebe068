"""The record of one run: its JSON (rewritten after every change), where it goes, the command
that reproduces the run, how a run's error becomes its outcome, the headline, and the
executed notebook turned into the record's notebook and HTML (nbformat and nbconvert,
imported where they are used).
"""
from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from html import escape

from kit.errors import Unsafe
from kit.events import utc_now
from kit.formats import dumps
from kit.files import write_atomic
from kit.runbook.catalog import declared_defaults
from kit.runbook.display import brokers_text, displayable, in_kernel, live_notebook
from kit.text import human_duration
from kit.throttle.decide import Settings


class CheckFailed(Exception):
    """A pre-check failed: the runbook stops here (outcome "stopped", `Record.ended_by`), and
    its record says why."""


class Record:
    """The machine-readable record of one run, rewritten (atomically) after every change so
    that a run cut short still leaves what it did. Parameters are stored as given: the
    runbooks take no credentials (ZooKeeper auth comes from KIT_ZK_AUTH, the Admin API's client
    settings from the file named by KIT_KAFKA_COMMAND_CONFIG).

    What a notebook shows of the record's state (the record itself, the gate's line, the
    unapplied line) is displayed through `watch`, and updated in place on every save: after
    Apply in a live notebook, the saved notebook, its HTML and the JSON tell the same story."""

    def __init__(self, path: str, runbook: str, parameters: dict):
        self.path = path or ""
        self.doc = {"runbook": runbook, "started": utc_now(), "finished": None, "outcome": "running",
                    "reason": None, "parameters": _public(parameters), "steps": [], "checks": [],
                    "command": command_line(runbook, parameters, self.path)}
        self._views: list[tuple] = []  # (display handle, render) kept in step with the record
        self.save()

    @contextlib.contextmanager
    def step(self, name: str):
        """Time one step; an exception is recorded against it, gives a run still running its
        outcome (`ended_by`: in a live notebook nothing else would close it) and goes on."""
        entry = {"step": name, "started": utc_now(), "seconds": None, "ok": None}
        self.doc["steps"].append(entry)
        self.save()  # a run cut short in this step says so
        t0 = time.monotonic()
        try:
            yield entry
            entry["ok"] = True
        except BaseException as e:
            entry["ok"] = False
            entry["error"] = f"{type(e).__name__}: {e}"
            self.ended_by(e, name)
            raise
        finally:
            entry["seconds"] = round(time.monotonic() - t0, 3)
            self.save()

    def ended_by(self, error: BaseException, step: str) -> None:
        """The outcome an exception leaving `step` gives the run, unless the runbook gave one
        already: a failed pre-check or a change refused as unsafe stops it, an interrupt
        (Jupyter's, Ctrl-C) interrupts it, anything else fails it. `kit run` keeps it."""
        if self.doc["outcome"] != "running":
            return
        if isinstance(error, (CheckFailed, Unsafe)):
            self.finish("stopped", str(error))
        elif isinstance(error, KeyboardInterrupt):
            self.finish("interrupted", f"interrupted during step {step!r}")
        else:
            self.finish("failed", f"{type(error).__name__}: {error}")

    def put(self, key: str, value) -> None:
        self.doc[key] = value
        self.save()

    def finish(self, outcome: str, reason: str | None = None) -> dict:
        self.doc.update(outcome=outcome, reason=reason, finished=utc_now())
        self.save()
        return self.doc

    def save(self) -> None:
        if self.path:
            write_atomic(self.path, dumps(self.doc))
        for handle, render in list(self._views):
            handle.update(displayable(render(self.doc)))

    def watch(self, render) -> None:
        """Display `render(doc)` (plain text, or anything IPython displays) here, in the running
        cell's output, and update it in place whenever the record changes. Outside a kernel,
        print it once."""
        shown = render(self.doc)
        if not in_kernel():
            print(shown)
            return
        from IPython.display import display

        self._views.append((display(displayable(shown), display_id=True), render))

    def detach(self) -> None:
        """Stop updating what `watch` displayed (the kernel is ending)."""
        self._views.clear()

    def show(self) -> None:
        """The record as its JSON file has it, kept up to date (the runbooks' last cell)."""
        self.watch(record_view)


def record_view(doc: dict) -> str:
    """The record as the notebook shows it: its JSON, indented."""
    return json.dumps(doc, indent=1, ensure_ascii=False)


def _public(parameters: dict) -> dict:
    secret = ("pass", "secret", "token", "auth", "key")
    return {k: ("***" if any(s in k.lower() for s in secret) else v) for k, v in sorted(parameters.items())
            if k != "record_path"}


def command_line(runbook: str, parameters: dict, record_path: str = "") -> str:
    """The `kit run` command that reproduces a run, with only the parameters that matter: not
    those at the runbook's declared default (`declared_defaults`), not the simulated cluster's
    (`SIMULATED_ONLY`) when the run was on a cluster of yours (zk or bootstrap), and not the
    working directory the run derived from its record (`default_workdir`): a rerun then gets
    its own, instead of overwriting this run's plan and rollback files."""
    defaults = declared_defaults(runbook)
    yours = bool(parameters.get("zk") or parameters.get("bootstrap"))
    args = ["kit", "run", runbook]
    for k, v in sorted(_public(parameters).items()):
        if (k in defaults and defaults[k] == v and type(defaults[k]) is type(v) or k in SIMULATED_ONLY and yours
                or k == "workdir" and v == default_workdir(runbook, record_path)):
            continue
        args += ["-p", k, v if isinstance(v, str) else json.dumps(v)]
    return " ".join(shlex.quote(a) for a in args)


# The runbooks' parameters that only the embedded simulated cluster reads.
SIMULATED_ONLY = ("cluster", "speed", "client_load")


def default_workdir(runbook: str, record_path: str = "") -> str:
    """Where a runbook keeps its files when its `workdir` parameter is empty, as the runbooks'
    first cell derives it: beside the record (<record>-files), else <runbook>-files."""
    return os.path.splitext(record_path)[0] + "-files" if record_path else f"{runbook}-files"


def run_workdir(parameters: dict | None, runbook: str, record_path: str = "") -> str:
    """A run's workdir: its `workdir` parameter, else `default_workdir`."""
    return (parameters or {}).get("workdir") or default_workdir(runbook, record_path)


def live_record_path(runbook: str) -> str:
    """In a live notebook, the record's path (`default_record_path`): a run there keeps its
    record from the start, so one that stops before the gate says why. Elsewhere "" (the
    caller gives `record_path`, as `kit run` does, or keeps none)."""
    return default_record_path(runbook) if live_notebook() else ""


def default_record_path(runbook: str) -> str:
    """A live notebook's record: <UTC timestamp>-<runbook>.json beside the notebook (-2, -3, …
    after the stamp when a run in the same second has it: a record is never overwritten)."""
    where = os.path.dirname(os.environ.get("JPY_SESSION_NAME") or "") or os.getcwd()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path, n = os.path.join(where, f"{stamp}-{runbook}.json"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(where, f"{stamp}-{n}-{runbook}.json")
    return path


def outcome_line(record: dict) -> str:
    """The outcome with its caveat: 'succeeded (with 2h 47m at the 10 MB/s fail-safe on
    brokers 1001, 1002)'."""
    line = record.get("outcome") or "running"
    floor = (record.get("timing") or {}).get("failsafe") or {}
    if floor.get("seconds"):
        line += (f" (with {human_duration(floor['seconds'])} at the {floor['rate'] / 1e6:.0f} MB/s fail-safe "
                 f"on brokers {brokers_text(sorted(int(b) for b in floor['brokers']), 8)})")
    return line


def outcome_text(doc: dict) -> str:
    """'outcome: succeeded (every partition done, throttles cleared)': how a run ended, in one line."""
    reason = doc.get("reason")
    return f"outcome: {outcome_line(doc)}" + (f" ({reason})" if reason else "")


def _headline_rows(record: dict) -> list[tuple[str, str]]:
    plan, change, timing = record.get("plan") or {}, record.get("change") or {}, record.get("timing") or {}
    rows = [("outcome", outcome_line(record)), ("why", record.get("reason") or "")]
    if plan:
        what = f"{plan.get('partitions', 0):,} partition(s)"
        if plan.get("replica_additions") is not None:
            what += f", {plan['replica_additions']:,} replica copies"
        if plan.get("bytes_moved_gb") is not None:
            what += f", {plan['bytes_moved_gb']:,.1f} GB to copy"
        if plan.get("brokers_in") or plan.get("brokers_out"):
            what += (f"; brokers losing replicas: {brokers_text(plan.get('brokers_out')) or 'none'}; "
                     f"gaining: {brokers_text(plan.get('brokers_in')) or 'none'}")
        rows.append(("what changed" if change else "what would change", what))
    if timing:
        clock = timing.get("clock")
        which = ("the simulated cluster's clock" if clock == "simulated" else "wall clock") if clock else ""
        actual = timing.get("actual_s")
        why = plan.get("estimate_unknown") if timing.get("estimate_s") is None else None
        rows.append((f"duration ({which})" if which else "duration",
                     f"estimated {human_duration(timing.get('estimate_s'))}{f' ({why})' if why else ''}, actual "
                     + (human_duration(actual) if actual is not None else
                        "not finished" if change else "not applied")))
        floor = timing.get("failsafe") or {}
        # A fixed throttle has no auto-throttle: no fail-safe, no minimum to speak of.
        auto = (record.get("parameters") or {}).get("throttle", "auto") == "auto"
        if change and (auto or timing.get("failsafe_s")):
            rows.append(("at the fail-safe (metrics missing)",
                         f"{human_duration(timing.get('failsafe_s') or 0)}"
                         + (f" ({floor['rate'] / 1e6:.0f} MB/s; brokers "
                            f"{brokers_text(sorted(int(b) for b in floor.get('brokers', {})))})"
                            if timing.get("failsafe_s") else "")))
        if change and timing.get("minimum_s") is not None and (auto or timing["minimum_s"]):
            rows.append(("at the minimum rate", f"{human_duration(timing['minimum_s'])} with some broker copying at "
                         f"the auto-throttle's {Settings().minimum / 1e6:.0f} MB/s minimum (the rate the plan is "
                         "applied with, until its first decision; the fail-safe; or a NIC its clients fill)"))
    urp = record.get("under_replicated") or {}
    if urp:
        after = urp.get("after")
        rows.append(("under-replicated partitions", f"{urp.get('before')} → {after if after is not None else '(not applied)'}"))
    if change.get("rollback"):
        rows.append(("rollback file", change["rollback"]))
    elif plan.get("file"):
        rows.append(("plan file", plan["file"]))
    rows.append(("started → finished (UTC, wall clock)", f"{record.get('started') or ''} → {record.get('finished') or '…'}"))
    if record.get("command"):
        rows.append(("reproduce", record["command"]))
    return [(k, v) for k, v in rows if v]


class Headline:
    """The record's headline, shown first: in `kit run`'s executed notebook and HTML, and at
    the end of a change started with the Apply button (`headline`)."""

    def __init__(self, record: dict):
        self.record = record

    def title(self) -> str:
        return f"{self.record.get('runbook', 'runbook')}: {outcome_line(self.record)}"

    def text(self) -> str:
        rows = _headline_rows(self.record)
        width = max(len(k) for k, _ in rows)
        return "\n".join([self.title()] + [f"  {k:<{width}}  {v}" for k, v in rows[1:]])

    def _repr_html_(self) -> str:
        rows = _headline_rows(self.record)
        ok = self.record.get("outcome") in ("succeeded", "planned") and not (self.record.get("timing") or {}).get("failsafe_s")
        color = "#2e7d32" if ok else "#c62828"
        body = "".join(f"<tr><th style='text-align:left;padding-right:1em;vertical-align:top;white-space:nowrap'>"
                       f"{escape(k)}</th>"
                       f"<td style='text-align:left'>{escape(str(v))}</td></tr>" for k, v in rows[1:])
        started = escape(str(self.record.get("started") or ""))  # marks this run's headline in a saved notebook
        return (f"<div class='kit-headline' data-started='{started}'><h2 style='color:{color};margin:0 0 .3em 0'>{escape(self.title())}</h2>"
                f"<table style='font-size:110%'>{body}</table></div>")

    def __repr__(self) -> str:
        return self.text()


def headline(record) -> Headline:
    """The headline of a record (its dict, a `Record`, or the path of its JSON file)."""
    if isinstance(record, Record):
        record = record.doc
    elif isinstance(record, (str, os.PathLike)):
        with open(record, encoding="utf-8") as fh:
            record = json.load(fh)
    return Headline(record)


HEADLINE_TAG = "kit-headline"
# nbconvert's JupyterLab page less what it fetches from a CDN (require.js, MathJax, mermaid, the
# widgets' renderer): a record opens complete with no network. The runbooks need none of them:
# their charts are PNGs, their tables HTML, and they write no formulas.
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def record_notebook(notebook: str, record: dict, out_notebook: str, html: str, hide_input: bool = False) -> None:
    """Turn an executed runbook into its record: a headline cell at the top (its input hidden;
    its output rendered from the JSON record), the HTML's title `<runbook>: <outcome>`, then
    the notebook and one self-contained HTML page that loads nothing from the network (charts
    are embedded PNGs; `OFFLINE_TEMPLATE`). Both are written whole or not at all."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    nb = nbformat.read(notebook, as_version=4)
    nb.cells = [c for c in nb.cells if HEADLINE_TAG not in c.get("metadata", {}).get("tags", [])]
    head = headline(record)
    where = record.get("json") or ""
    cell = nbformat.v4.new_code_cell(
        f"# The record's headline, filled in from the JSON record when the run ended.\n"
        f"from kit.runbook.steps import headline\nheadline({where!r})" if where else "# The record's headline.")
    cell.metadata.update(tags=[HEADLINE_TAG], jupyter={"source_hidden": True})
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": head._repr_html_(),
                                                                  "text/plain": head.text()})]
    nb.cells.insert(0, cell)
    nb.metadata["title"] = head.title()
    exporter = HTMLExporter(exclude_input=hide_input, exclude_input_prompt=hide_input,
                            extra_loaders=[DictLoader({"kit-offline.html.j2": OFFLINE_TEMPLATE})],
                            template_file="kit-offline.html.j2")
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HEADLINE_TAG}, enabled=True), True)
    body, _ = exporter.from_notebook_node(nb)
    write_atomic(out_notebook, nbformat.writes(nb) + "\n")
    write_atomic(html, body)
