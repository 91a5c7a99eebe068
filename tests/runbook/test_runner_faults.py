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

from kit.runbook import catalog, steps

ROOT = Path(__file__).resolve().parents[2]


# -- the runbooks as package data, listed without papermill ------------------------------------

def test_listing_the_runbooks_needs_neither_papermill_nor_the_steps():
    """`kit run` alone lists the runbooks and their parameters from the notebooks' JSON: it took
    4.6 s when it imported papermill and the runbooks' steps to inspect each notebook."""
    code = ("import sys; from kit.cli import main; rc = main(['run']); "
            "print('LOADED', sorted(m for m in ('papermill', 'nbclient', 'kit.runbook.steps', 'kit.runbook.runner') "
            "if m in sys.modules), rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "LOADED [] 0"
    for name in catalog.available():
        assert f"\n{name}\n" in f"\n{r.stdout}"
    assert '  speed: float = 2000.0  # simulated cluster only: simulated seconds per wall second' in r.stdout
    assert "record_path" not in r.stdout  # kit run fills it in


def test_the_parameters_cell_is_read_as_papermill_reads_it(tmp_path):
    """One reading of a parameters cell: papermill's. kit's own (no papermill import) must agree
    with it on every runbook and on the cases papermill's parser has rules for."""
    import nbformat
    import papermill

    def papermills(path):
        return {k: {"type": v["inferred_type_name"], "default": v["default"], "help": v["help"]}
                for k, v in papermill.inspect_notebook(str(path)).items()}
    odd = tmp_path / "odd.ipynb"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(
        "# a comment line\n"
        'cap_map: dict = {  # the first line\'s comment is dropped\n'
        '    "standard": 125,\n'
        '}  # the help is the last line\'s\n'
        "\n"
        "untyped = 3\n"
        "commented = 'x'  # type: str the help after a type comment\n"
        "a = b = 2  # two assignments: papermill skips the line\n"
        "quoted: 'float' = 1.5\n")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("no parameters here"), cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(odd))
    assert catalog.declared_parameters(odd) == papermills(odd)
    assert list(catalog.declared_parameters(odd)) == ["cap_map", "untyped", "commented", "quoted"]
    for name in catalog.available():
        path = catalog.runbook_path(name)
        assert catalog.declared_parameters(path) == papermills(path), name


def test_the_runbooks_are_package_data_found_through_importlib():
    from importlib import resources

    folder = resources.files("kit") / "runbooks"
    assert catalog.RUNBOOKS == Path(str(folder))
    names = sorted(p.name for p in (ROOT / "runbooks").glob("*.ipynb"))
    assert names and sorted(p.name for p in catalog.RUNBOOKS.glob("*.ipynb")) == names
    assert all((catalog.RUNBOOKS / "clusters" / f"{Path(n).stem}.json").is_file() for n in names)


@pytest.mark.slow
def test_a_wheel_carries_the_runbooks_and_runs_them_from_anywhere(tmp_path):
    """`pip install .` (no checkout, no editable link) can `kit run`: the wheel holds every
    runbook and simulated cluster, and kit installed from it lists and runs one from another
    directory. The wheel is built as pip builds it for an install (its own build environment)."""
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    wheel = next(dist.glob("kit-*.whl"))
    inside = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((ROOT / "runbooks").rglob("*")):
        if path.is_file() and path.suffix in (".ipynb", ".json"):
            assert f"kit/runbooks/{path.relative_to(ROOT / 'runbooks')}" in inside, path
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site))
    probe = subprocess.run([sys.executable, "-c", "import kit; print(kit.__file__)"], capture_output=True,
                           text=True, cwd=elsewhere, env=env, timeout=60)
    assert probe.stdout.startswith(str(site)), probe.stdout + probe.stderr
    listed = subprocess.run([sys.executable, "-m", "kit", "run"], capture_output=True, text=True, cwd=elsewhere,
                            env=env, timeout=120)
    assert listed.returncode == 0 and "broker_replacement\n" in listed.stdout, listed.stderr
    ran = subprocess.run([sys.executable, "-m", "kit", "run", "broker_replacement", "--record-dir", "records"],
                         capture_output=True, text=True, cwd=elsewhere, env=env, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    record = json.loads(next((elsewhere / "records").glob("*-broker_replacement.json")).read_text())
    assert record["outcome"] == "planned" and record["plan"]["partitions"] > 0


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
