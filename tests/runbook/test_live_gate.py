"""The live notebook path without a browser: a real "kit" kernel that believes it runs in
JupyterLab (JPY_SESSION_NAME set), the runbook run to its gate, then the Apply button pressed
from an extra cell, as a person presses it. The saved notebook, the JSON record and its HTML
must then tell one story; and running the notebook again (a fresh kernel, as after a kernel
restart) on the same workdir must work with no hand clean-up."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from queue import Empty

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
papermill = pytest.importorskip("papermill")

from kit.runbook import runner  # noqa: E402
from kit.runbook.steps import headline, record_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CLICK = """\
import ipywidgets.widgets.widget as _w
_buttons = [w for w in list(_w._instances.values()) if getattr(w, "description", "") == "Apply"]
assert len(_buttons) == 1, _buttons
_buttons[0].click()
"""


def _look_again_every_second(client) -> None:
    """Make the client's wait for a cell's reply look at the shell socket again every second.
    One long wait can miss the reply's wake-up on its socket (ipykernel 7 sends shell
    replies raw on the ROUTER: ipython/ipykernel#1529, #1554): the Apply cell's reply, sent
    after some 40 s of output, was then read only at the cell's timeout, 600 s after it
    started, and this test took 10 minutes."""
    wait = client.kc.shell_channel.get_msg

    async def get_msg(timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 1.0 if deadline is None else min(1.0, max(deadline - time.monotonic(), 0.0))
            try:
                return await wait(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    client.kc.shell_channel.get_msg = get_msg


def run_live(notebook: Path, parameters: dict, press_apply: bool, timeout: float = 600.0):
    """Execute the runbook in a live-notebook kernel (optionally pressing Apply at the end)."""
    nb = papermill.iorw.load_notebook_node(str(ROOT / "runbooks" / "broker_replacement.ipynb"))
    nb = papermill.parameterize.parameterize_notebook(nb, parameters)
    if press_apply:
        nb.cells.append(nbformat.v4.new_code_cell(CLICK))
    env = {**os.environ, "JPY_SESSION_NAME": str(notebook),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name=runner.kernel_name(),
                                     resources={"metadata": {"path": str(notebook.parent)}},
                                     on_notebook_start=lambda **_: _look_again_every_second(client))
    client.execute(env=env)
    nbformat.write(nb, str(notebook))
    return nb


def texts(cell) -> str:
    out = []
    for o in cell.get("outputs", []):
        out.append("".join(o.get("text", "")))
        data = o.get("data", {})
        out.append(str(data.get("text/plain", "")) + str(data.get("text/html", "")))
    return "\n".join(out)


def cell_with(nb, source: str):
    return next(c for c in nb.cells if c.cell_type == "code" and source in c.source)


@pytest.mark.slow
def test_apply_pressed_leaves_one_story_and_a_second_run_on_the_same_workdir_works(tmp_path):
    workdir = tmp_path / "work"
    notebook = tmp_path / "broker_replacement.ipynb"
    params = {"speed": 20000.0, "workdir": str(workdir)}
    nb = run_live(notebook, params, press_apply=True)

    records = sorted(tmp_path.glob("*-broker_replacement.json"))
    assert len(records) == 1, records  # written from the start, beside the notebook
    record = json.loads(records[0].read_text())
    assert record["outcome"] == "succeeded", record.get("reason")
    # Applied with the button: the parameters, the command and who pressed it say so.
    assert record["parameters"]["apply"] is True and "-p apply true" in record["command"]
    assert record["applied_by"] == "the Apply button in a live notebook" and record["applied_by_user"]
    assert record["finished"] and record["timing"]["actual_s"] > 0

    # Every output that describes the state shows the final state.
    gate = texts(cell_with(nb, "run.gate("))
    assert "broker_replacement: succeeded" in gate and "Waiting for Apply" not in gate
    unapplied = texts(cell_with(nb, "run.finish_unapplied("))
    assert "outcome: succeeded" in unapplied and "Not applied yet" not in unapplied
    shown = json.loads(cell_with(nb, "record.show()").outputs[-1]["data"]["text/plain"])
    assert shown == record  # the notebook's record cell is the JSON record
    everything = "\n".join(texts(c) for c in nb.cells)
    assert "'outcome': 'running'" not in everything and "apply=False: nothing is changed" not in everything

    # The HTML record, made from the saved notebook as the save watcher makes it, agrees too.
    html = tmp_path / "record.html"
    record_notebook(str(notebook), dict(record, json=str(records[0])), str(tmp_path / "record.ipynb"), str(html))
    page = html.read_text()
    assert "<title>broker_replacement: succeeded" in page and "Not applied yet" not in page
    assert headline(record).title().startswith("broker_replacement: succeeded")

    # Run again on the same workdir in a new kernel (a kernel restart, Run All): the simulated
    # cluster kit left there is replaced, said in one line; the kernel ending closes the record.
    nb2 = run_live(notebook, params, press_apply=False)
    situation = texts(cell_with(nb2, "run.situation("))
    assert situation.count("Replacing the simulated cluster kit started in") == 1, situation
    assert "broker_replacement: succeeded" not in texts(cell_with(nb2, "run.gate("))
    second = [p for p in sorted(tmp_path.glob("*-broker_replacement.json")) if p != records[0]]
    assert len(second) == 1
    rec2 = json.loads(second[0].read_text())
    assert all(s["ok"] for s in rec2["steps"]) and rec2["plan"]["partitions"] > 0
    assert rec2["outcome"] == "planned" and "kernel ended before Apply" in rec2["reason"]
    assert json.loads(records[0].read_text()) == record  # the first record is untouched


def test_a_save_made_before_the_html_watch_begins_still_gives_the_html_record(tmp_path, monkeypatch):
    # CI of bc0aa1f (JupyterLab, loaded): the gate shows the headline as soon as the record
    # finishes; the change's last steps ran on, the save came before the watch began, and the
    # watch, which wanted a save newer than itself, never wrote the HTML record.
    import nbformat

    from kit.runbook.gate import keep_html_record
    from kit.runbook.record import Record
    from kit.testing import wait_for

    record = Record(str(tmp_path / "run.json"), "broker_replacement", {"apply": True})
    record.finish("succeeded")
    record.save()
    notebook = tmp_path / "broker_replacement.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("gate()", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/html": headline(record)._repr_html_(), "text/plain": "headline"})])])
    nbformat.write(nb, str(notebook))
    saved_at = time.time() - 10
    os.utime(notebook, (saved_at, saved_at))  # saved before the watch begins
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    keep_html_record(record, wait_s=600)
    # The JSON names the HTML record last, once it is written.
    html = wait_for("the HTML record", lambda: json.loads((tmp_path / "run.json").read_text()).get("html"), 600)
    assert html == str(tmp_path / "run.html")
    assert "broker_replacement: succeeded" in Path(html).read_text()
