"""The gate and the run's end: apply now, show an Apply button in a live notebook (what it
will do, then the record's state in place), or record that the plan was not applied; and the
live path's HTML record, written once the notebook is saved."""
from __future__ import annotations

import atexit
import os
import threading
import time
from html import escape

from kit.events import utc_now
from kit.runbook.display import live_notebook
from kit.runbook.environment import Environment, rollback_path
from kit.runbook.record import (Headline, Record, command_line, default_record_path, headline, outcome_text,
                                record_notebook)
from kit.text import human_duration


def preview_text(record: Record | None, env: Environment | None) -> str:
    """What Apply will do: partitions, bytes, the estimate, and the rollback file."""
    plan = (record.doc.get("plan") if record is not None else None) or {}
    parts = [f"{plan['partitions']:,} partition(s)"] if plan.get("partitions") is not None else []
    if plan.get("bytes_moved_gb") is not None:
        parts.append(f"{plan['bytes_moved_gb']:,.1f} GB to copy")
    if plan.get("estimate_s") is not None:
        parts.append(f"estimated {human_duration(plan['estimate_s'])}"
                     + (" of the simulated cluster's time" if env is not None and env.simulated else ""))
    line = "Apply will move " + ", ".join(parts) if parts else "Apply will carry out the plan"
    if env is not None:
        line += f"; the rollback plan is written first, to {rollback_path(env)}"
    return line


def gate(apply: bool, on_apply, record: Record | None = None, env: Environment | None = None) -> bool:
    """True when the runbook may change the cluster now (`apply=True`). Otherwise, in a live
    notebook, show what Apply will do and an Apply button that runs `on_apply()` when
    pressed (its progress, charts and headline show below the button); the line below the
    preview follows the record (waiting, applying, then the headline), so the saved notebook
    keeps the outcome. Under papermill nothing is applied and `finish_unapplied` records that
    the run only planned."""
    print(preview_text(record, env))
    if apply:
        print("apply=True: applying the plan")
        return True
    if not live_notebook():
        print("apply=False: nothing is changed. Re-run with -p apply true, or open the notebook in JupyterLab "
              "and press Apply.")
        return False
    import ipywidgets as widgets
    from IPython.display import HTML, display

    button = widgets.Button(description="Apply", button_style="danger", icon="play")
    out = widgets.Output()
    # In the cell's own output (not the button's widget), so its last state is saved with the notebook.
    if record is not None:
        record.watch(lambda doc: gate_view(doc, record.path))
    else:
        display(HTML(f"<b>Waiting for Apply</b>: {NOTHING_CHANGED}."))

    def clicked(_):
        button.disabled = True
        if record is not None:
            applied(record)
        with out:
            try:
                on_apply()
            except Exception as e:  # noqa: BLE001  (a button has no caller to raise to: the record and the headline say it)
                print(f"{type(e).__name__}: {e}")
                if record is not None and record.doc.get("outcome") == "running":
                    record.finish("failed", f"{type(e).__name__}: {e}")
            if record is not None:
                display(headline(record))
                keep_html_record(record)
    button.on_click(clicked)
    display(widgets.VBox([button, out]))
    return False


NOTHING_CHANGED = "nothing has changed yet"

WAITING = "waiting for the Apply button in a live notebook"

APPLY_BUTTON = "the Apply button in a live notebook"


def applied(record: Record) -> None:
    """Record that the Apply button was pressed: who pressed it and when, the parameters and
    the command as the run now is (apply true). Written before anything changes."""
    if not record.path:
        record.path = default_record_path(record.doc["runbook"])
    parameters = {**record.doc["parameters"], "apply": True}
    record.doc.update(parameters=parameters, command=command_line(record.doc["runbook"], parameters, record.path),
                      applied_by=APPLY_BUTTON, applied_by_user=_user(), applied_at=utc_now(),
                      reason=None if record.doc.get("reason") == WAITING else record.doc.get("reason"))
    record.save()


def _user() -> str:
    """Who is at the notebook: JupyterHub's user, else the kernel's OS user."""
    import getpass

    try:
        return os.environ.get("JUPYTERHUB_USER") or getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return str(os.getuid())


def gate_view(doc: dict, path: str = ""):
    """The gate's line as the record stands (its JSON at `path`): waiting, applying, or the
    headline once the run ended."""
    from IPython.display import HTML

    if doc.get("outcome") != "running":
        return Headline(doc)
    if doc.get("applied_at"):
        return HTML(f"<b>Applying</b> since {escape(doc['applied_at'])} UTC; progress below. "
                    f"Record: {escape(path)}")
    return HTML(f"<b>Waiting for Apply</b>: {NOTHING_CHANGED}.")


def unapplied_view(doc: dict) -> str:
    """The line below the gate in a live notebook, as the record stands."""
    if doc.get("outcome") != "running":
        return outcome_text(doc)
    if doc.get("applied_at"):
        return f"Applied with the Apply button above at {doc['applied_at']} UTC; the change is running (progress above)."
    return f"Not applied yet: press Apply above to change the cluster; until then {NOTHING_CHANGED}."


def keep_html_record(record: Record, wait_s: float = 1800.0) -> None:
    """The live path's HTML record, written as `kit run` writes it once the notebook is next
    saved with the outcome in it (the kernel cannot read the open notebook before that):
    <record>.ipynb and <record>.html beside the JSON."""
    notebook = os.environ.get("JPY_SESSION_NAME") or ""
    if not record.path or not os.path.exists(notebook):
        return
    stem = os.path.splitext(record.path)[0]
    # This run's headline, as Headline writes it. The gate shows it as soon as the record
    # finishes, and a save holding it may come before this watch begins (the change's last
    # steps run in between): any save holding it is one made after the run ended.
    marker = f"data-started='{record.doc.get('started')}'"
    print(f"The HTML record ({stem}.html) is written once this notebook is saved with the headline above (Ctrl+S).")

    def watch():
        deadline = time.monotonic() + wait_s
        looked_at = None  # the save last read; the first look reads a save made before the watch
        while time.monotonic() < deadline:
            saved = False
            try:
                mtime = os.stat(notebook).st_mtime_ns
                if mtime != looked_at:
                    looked_at = mtime
                    with open(notebook, encoding="utf-8") as fh:
                        saved = marker in fh.read()
            except OSError:
                pass
            if saved:
                doc = dict(record.doc, json=record.path)
                record_notebook(notebook, doc, stem + ".ipynb", stem + ".html")
                record.doc.update(html=stem + ".html", notebook=stem + ".ipynb")
                record.save()
                return
            time.sleep(1.0)
    threading.Thread(target=watch, name="kit-html-record", daemon=True).start()


def finish(record: Record, env: Environment, outcome: str, reason: str | None = None, keep: bool = False) -> dict:
    """Close the record (and the embedded cluster, unless kept for an Apply button press); the
    record says what the cluster was reached through."""
    record.put("reached_through", env.reached_through)
    doc = record.finish(outcome, reason)
    if not keep:
        env.close()
    print(outcome_text(doc))
    return doc


def finish_unapplied(record: Record, env: Environment, reason: str = "apply=False: the plan was not applied") -> dict:
    """The gate said no. Under papermill the run ends here as "planned". In a live notebook the
    operator has not decided yet (the Apply button may still be pressed): the line shown here
    follows the record (waiting, applied, the outcome), and a kernel that ends before Apply is
    pressed closes the record as "planned" then."""
    if live_notebook():
        if record.doc.get("outcome") == "running" and not record.doc.get("applied_at"):
            record.put("reason", WAITING)
            atexit.register(_close_at_exit, record, env)
        record.watch(unapplied_view)
        return record.doc
    return _close_unapplied(record, env, reason)


def _close_at_exit(record: Record, env: Environment) -> None:
    record.detach()  # the kernel is ending: no notebook to update any more
    _close_unapplied(record, env, "the notebook's kernel ended before Apply was pressed; the plan was not applied")


def _close_unapplied(record: Record, env: Environment, reason: str) -> dict:
    """Close a record whose plan was not applied as "planned" (nothing done if it was applied
    or has ended since)."""
    if record.doc.get("outcome") != "running" or record.doc.get("applied_at"):
        return record.doc
    plan = record.doc.get("plan") or {}
    if plan:
        record.doc["timing"] = {"estimate_s": plan.get("estimate_s"), "actual_s": None,
                                "clock": "simulated" if env.simulated else "wall", "failsafe_s": 0.0}
    return finish(record, env, "planned", reason, keep=True)
