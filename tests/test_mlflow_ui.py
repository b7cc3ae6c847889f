"""The README's MLflow steps, driven in the real MLflow UI (the pinned version) in headless
Chromium: the sweep's runs appear in the runs table with their median latency. Skips with the
reason where no browser is installed (.ci/run installs Debian's chromium and chromium-driver)."""

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from harness.multirun import sweep_table
from harness.records import background

mlflow = pytest.importorskip("mlflow")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra has it)")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="no chromium/chromedriver (apt-get install chromium "
                                                                  "chromium-driver)")
WINDOW = "1900,700"
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_runs_table(url: str, shot: Path | None = None) -> str:
    """The runs page as the sweep printed it (the headline metrics as columns: the harness's shared view), the
    sweep expanded by a click, as a user would."""
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WINDOW}",
                "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        d.get(url)
        wait = WebDriverWait(d, 90)
        # the runs table, not MLflow 3's GenAI overview of the experiment ("No data available")
        wait.until(lambda drv: "/runs" in drv.current_url and "matching runs" in drv.find_element(By.TAG_NAME,
                                                                                                  "body").text)
        assert "workflowType=genai" not in d.current_url
        # no column chosen by hand: the view the harness tagged the experiment with shows the headline metrics
        wait.until(lambda drv: "latency_median_ms" in drv.find_element(By.TAG_NAME, "body").text)
        expand = wait.until(ec.element_to_be_clickable(
            (By.CSS_SELECTOR, "[role='row'] button[data-component-id*='runnamecellrenderer']")))
        expand.click()
        wait.until(lambda drv: "PyTorch" in drv.find_element(By.TAG_NAME, "body").text)
        time.sleep(1)
        if shot is not None:
            d.save_screenshot(str(shot))
        rows: dict[str, list[str]] = {}  # the grid renders pinned and scrolled parts of a row apart
        for r in d.find_elements(By.CSS_SELECTOR, "[role='row']"):
            rows.setdefault(r.get_attribute("row-index") or r.text, []).append(r.text.replace("\n", " | "))
        return "\n".join(" | ".join(parts) for parts in rows.values())
    finally:
        d.quit()


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One CPU sweep of two backends (PyTorch and the harness's overhead), shared: (its folder, its console)."""
    tmp_path = tmp_path_factory.mktemp("sweep")
    res = subprocess.run([sys.executable, "-m", "harness", "-m", "model=sample", "device=cpu", "runner=quick",
                          "backend=pytorch,overhead", f"tracking.results_dir={tmp_path}"],
                         capture_output=True, text=True, timeout=600, cwd=REPO)
    assert res.returncode == 0, res.stderr[-2000:]
    assert background.wait(tmp_path) == []  # its end batch, sent by a detached upload, reached the store
    return tmp_path, res


def test_the_runs_table_shows_the_sweep_with_latency(swept):
    tmp_path, res = swept
    records = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                               f"sqlite:///{tmp_path / 'mlflow.db'}", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        exp = mlflow.tracking.MlflowClient(f"http://127.0.0.1:{port}").get_experiment_by_name("harness")
        # the first sweep in a new store prints the UI's home (the store is made after it returns); every later
        # command the runs page ("runs: mlflow ui ... then http://127.0.0.1:5000/#/experiments/<id>/runs?...")
        assert re.findall(r"then  http://127\.0\.0\.1:5000/(\S*)", res.stdout) == [""]
        (sweep_id,) = re.findall(r"report: python -m harness.report (\w+)", res.stdout)
        (line, _) = sweep_table.where_to_look(tmp_path, sweep_id, sending=True)
        (printed,) = re.findall(r"then  http://127\.0\.0\.1:5000/(\S+)", line)
        assert printed.startswith(f"#/experiments/{exp.experiment_id}/runs")
        table = open_runs_table(f"http://127.0.0.1:{port}/{printed}", tmp_path / "runs.png")
    finally:
        server.terminate()
        server.wait(30)
    assert "sweep backend=pytorch,overhead device=cpu model=sample runner=quick" in table
    for rec in records:
        (row,) = [line for line in table.splitlines() if rec["run_name"] in line]
        shown = [float(x) for x in re.findall(r"\d+\.\d+(?:e-?\d+)?", row)]
        assert any(abs(v - rec["metrics"]["latency_median_ms"]) <= 1e-3 * rec["metrics"]["latency_median_ms"] + 1e-3
                   for v in shown), (row, rec["metrics"]["latency_median_ms"])


def test_the_html_report_opens_in_a_browser_with_its_tables_distributions_and_environment(swept):
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    results, res = swept
    (sweep_id,) = re.findall(r"report: python -m harness.report (\w+)", res.stdout)
    made = subprocess.run([sys.executable, "-m", "harness.report", sweep_id, "--results-dir", str(results),
                           "--no-mlflow"], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert made.returncode == 0, made.stderr[-2000:]
    (folder,) = (results / "reports").glob(f"*{sweep_id}")
    first = (folder / "report.md").read_text().split("| sample |")[1].split("\n")[0]
    cells = [c.strip() for c in first.split("|") if c.strip()]  # the first table's row, as written
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1200,900", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        d.get((folder / "index.html").as_uri())
        text = d.find_element(By.TAG_NAME, "body").text
        images = {img.get_attribute("alt"): img.get_property("naturalWidth") for img in d.find_elements(By.TAG_NAME,
                                                                                                         "img")}
        page_width = d.execute_script("return document.documentElement.scrollWidth")
        d.save_screenshot(str(folder / "page.png"))
    finally:
        d.quit()
    assert len(cells) == 2 and all(c in text for c in cells), (cells, text[:2000])
    assert images.get("latency-distributions", 0) > 300  # the plot of each job's samples, decoded and drawn
    assert "environment" in text and "PyTorch" in text and "Summary lines" in text
    assert "IOS" not in text  # nothing names a backend the sweep did not run
    assert page_width <= 1200  # no line runs off the page
    assert (folder / "page.png").stat().st_size > 20_000
