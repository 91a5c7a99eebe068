"""The interactive path, in a real JupyterLab driven by Debian's chromium: open the broker
replacement runbook (its embedded simulated cluster), run every cell, press Apply, watch the
progress change while the copy runs, then find the outcome in the saved notebook, the JSON
record beside it, and the HTML record written once the notebook is saved.

Screenshots (JupyterLab after the change, the record's HTML) are kept in the test's tmp dir;
their paths are printed (pytest -s shows them)."""
from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kit.testing import stop_process

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
JUPYTER = Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "jupyter"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str):
    end = time.monotonic() + timeout
    got = None
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}: last saw {str(got)[:300]}")


def _notebook(tmp: Path, speed: float) -> Path:
    """The runbook as an operator opens it, with a speed that makes the copy last some seconds."""
    nb = json.loads((ROOT / "runbooks" / "broker_replacement.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    cell["source"] = [line.replace("speed: float = 2000.0", f"speed: float = {speed}") for line in cell["source"]]
    assert any(f"speed: float = {speed}" in line for line in cell["source"])
    path = tmp / "broker_replacement.ipynb"
    path.write_text(json.dumps(nb, indent=1))
    return path


@pytest.fixture
def jupyterlab(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no chromium at {CHROMIUM}")
    if not JUPYTER.exists():
        pytest.skip(f"no jupyter at {JUPYTER}")
    root = tmp_path / "notebooks"
    root.mkdir()
    port, token = _free_port(), "kit-live-test-token"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config")}
    log = open(tmp_path / "jupyterlab.log", "w")
    proc = subprocess.Popen([str(JUPYTER), "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
                             f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root",
                             "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
    base = f"http://127.0.0.1:{port}"

    def up():
        try:
            return urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=3).status == 200
        except (urllib.error.URLError, ConnectionError, OSError):
            return False
    try:
        _wait(up, 120, "JupyterLab to listen")
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                yield {"base": base, "token": token, "root": root, "browser": browser, "tmp": tmp_path}
            finally:
                browser.close()
    finally:
        stop_process(proc)
        log.close()


@pytest.mark.slow
def test_apply_in_jupyterlab_shows_progress_and_leaves_the_record(jupyterlab):
    lab = jupyterlab
    root: Path = lab["root"]
    # The copy's 11,500 simulated seconds take 11.5 wall s of pace at 1,000x: long enough for
    # the progress line to change three times, however fast the auto-throttle's rounds (at
    # 3,000x they had held the copy 0.2 s each, until the clock's barrier stopped waiting a tick).
    saved = _notebook(root, speed=1000.0)
    page = lab["browser"].new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(120_000)
    page.goto(f"{lab['base']}/lab/tree/{saved.name}?token={lab['token']}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=180_000)
    # The kernel ("kit") is up when the status says idle.
    page.wait_for_selector("text=| Idle", timeout=180_000)  # the status bar: the "kit" kernel is up
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()

    # The gate first says what Apply will do.
    page.wait_for_selector("text=Apply will move", timeout=300_000)
    button = page.locator(".jupyter-widgets button", has_text="Apply").first
    button.wait_for(state="visible", timeout=300_000)
    assert page.locator("text=Waiting for Apply").count() >= 1  # nothing says "planned"
    assert page.locator("text=outcome: planned").count() == 0
    button.click()

    seen: list[str] = []

    def progress_moved():
        texts = page.locator(".widget-html pre").all_inner_texts()
        for t in texts:
            if "GB left" in t and t not in seen:
                seen.append(t)
        return len(seen) >= 3 or page.locator(".kit-headline").count() > 0
    _wait(progress_moved, 300, "the progress line to change")
    assert len(seen) >= 3, f"the progress line changed only {len(seen)} time(s) before the end: {seen}"

    page.wait_for_selector(".kit-headline", timeout=300_000)
    headline = page.locator(".kit-headline").first.inner_text()
    assert "broker_replacement: succeeded" in headline, headline
    assert "estimated" in headline and "actual" in headline and "simulated cluster" in headline
    shot = lab["tmp"] / "jupyterlab-after-apply.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"\nJupyterLab screenshot: {shot}")

    # The JSON record beside the notebook says how it went.
    records = _wait(lambda: [p for p in glob.glob(str(root / "*-broker_replacement.json"))
                             if json.loads(Path(p).read_text()).get("outcome") == "succeeded"], 120,
                    "the JSON record")
    record = json.loads(Path(records[0]).read_text())
    assert record["timing"]["clock"] == "simulated" and record["timing"]["actual_s"] > 0
    assert record["change"]["done"] and record["under_replicated"]["after"] == 0
    assert record["command"].startswith("kit run broker_replacement -p apply true")

    # Saved (Ctrl+S), the notebook keeps the outcome; the HTML record follows the save.
    page.locator(".jp-Notebook").first.click()
    page.keyboard.press("Control+s")
    _wait(lambda: "broker_replacement: succeeded" in saved.read_text(), 120, "the saved notebook to hold the outcome")
    html = Path(os.path.splitext(records[0])[0] + ".html")
    _wait(html.exists, 300, f"the HTML record {html}")  # an nbconvert export in a loaded kernel
    text = html.read_text()
    assert "<title>broker_replacement: succeeded" in text
    assert text.index("kit-headline") < text.index("Broker replacement")  # the headline comes first
    assert json.loads(Path(records[0]).read_text()).get("html") == str(html)
    record_page = lab["browser"].new_page(viewport={"width": 1200, "height": 900})
    record_page.set_default_timeout(120_000)
    record_page.goto(html.as_uri())
    shot = lab["tmp"] / "live-record-html.png"
    record_page.screenshot(path=str(shot), full_page=True)
    print(f"record HTML screenshot: {shot}")
