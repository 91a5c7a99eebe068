"""`kit run` through a real night: interrupted (SIGINT, SIGTERM), a record folder that is
read-only or fills up, two runs side by side, records opened offline, and the runbooks shipped
inside the package (a wheel installed elsewhere runs them)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kit.runbook import steps

ROOT = Path(__file__).resolve().parents[2]


# -- the HTML record opens offline ------------------------------------------------------------

class _Loads(HTMLParser):
    """What a page would fetch: script/img/iframe/source sources, stylesheet links, CSS url()s
    and @imports, and modules imported by inline scripts."""

    def __init__(self):
        super().__init__()
        self.loads, self.links, self._tag = [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._tag = tag
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and a.get("src"):
            self.loads.append(a["src"])
        if tag == "link" and a.get("href"):
            self.loads.append(a["href"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])

    def handle_data(self, data):
        import re

        if self._tag in ("style", "script"):
            self.loads += re.findall(r"""url\(\s*['"]?([^'")\s]+)""", data)
            self.loads += re.findall(r"""@import\s+['"]([^'"]+)""", data)
            self.loads += re.findall(r"""import\(\s*['"]([^'"]+)""", data)


def test_the_html_record_loads_nothing_from_the_network(tmp_path):
    """Offline, a record opened with no console errors: no require.js, MathJax, mermaid or
    widget renderer from a CDN (links to read stay links)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Broker replacement\nRead [Kafka's docs](https://kafka.apache.org)."),
                nbformat.v4.new_code_cell("1 + 1", outputs=[nbformat.v4.new_output(
                    "execute_result", data={"text/plain": "2"}, execution_count=1)])]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                              "version_minor": 0}}
    src = tmp_path / "run.ipynb"
    nbformat.write(nb, str(src))
    record = {"runbook": "broker_replacement", "outcome": "planned", "started": "2024-01-01T00:00:00Z"}
    out, html = tmp_path / "out.ipynb", tmp_path / "out.html"
    steps.record_notebook(str(src), record, str(out), str(html))
    page = _Loads()
    page.feed(html.read_text())
    remote = [u for u in page.loads if u.startswith(("http:", "https:", "//"))]
    assert remote == [], remote
    assert "https://kafka.apache.org" in page.links
    assert "<title>broker_replacement: planned</title>" in html.read_text()
    assert nbformat.read(str(out), as_version=4).cells[0].metadata["tags"] == [steps.HEADLINE_TAG]


# -- the record says how the run ended ---------------------------------------------------------

@pytest.mark.parametrize("error, outcome", [
    (steps.CheckFailed("pre-check failed: broker 4242 is live"), "stopped"),
    (ValueError("no such topic"), "failed"),
    (KeyboardInterrupt(), "interrupted"),
])
def test_the_record_owns_the_outcome_of_a_step_that_raised(tmp_path, error, outcome):
    """The runbook's Record says how its run ended; `kit run` completes it, it does not work
    the outcome out from exception class names."""
    path = tmp_path / "record.json"
    record = steps.Record(str(path), "broker_replacement", {"apply": True})
    with pytest.raises(type(error)), record.step("pre-checks"):
        saved = json.loads(path.read_text())
        assert saved["steps"][-1] == {**saved["steps"][-1], "step": "pre-checks", "ok": None}  # cut short: known
        raise error
    saved = json.loads(path.read_text())
    assert saved["outcome"] == outcome and saved["finished"], saved
    assert saved["steps"][-1]["ok"] is False and saved["steps"][-1]["seconds"] is not None
    with pytest.raises(RuntimeError), record.step("later"):
        raise RuntimeError("after the outcome was given")
    assert json.loads(path.read_text())["outcome"] == outcome  # the first one stands
