"""`hilbench report DIR --html OUT` read back in a real headless Chromium (Debian's, through
selenium): what the page shows, not only that it exists. Also --all-runs and --events."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from hilbench.trace import Trace
from tests.cli_helpers import hilbench

RUNS = """
def test_short_run(zo_session):
    zo_session(budget=400, scheduler="fixed:2", eval_every=200)
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder as a lab leaves it: a pytest --backends session (twin and SIL), a run of
    `hilbench run` stopped by a time limit, and a file that is no trace."""
    root = tmp_path_factory.mktemp("runs")
    (root / "test_lab.py").write_text(RUNS)
    traces = root / "traces"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--backends",
            "emulate,sil",
            "--trace-dir",
            str(traces),
            str(root / "test_lab.py"),
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stopped = hilbench(
        "run",
        "--budget",
        "100000000",
        "--time-limit",
        "1s",
        "--no-live",
        "--trace",
        str(traces / "cli" / "stopped.h5"),
    )
    assert stopped.returncode == 0, stopped.stderr
    (traces / "notes.h5").write_text("not a trace")
    return traces


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (tools/install-deps)")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    yield driver
    driver.quit()


def test_the_page_shows_every_run_the_groups_and_the_plots(folder, tmp_path, browser):
    from selenium.webdriver.common.by import By

    out = tmp_path / "report.html"
    proc = hilbench("report", str(folder), "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "wrote" in proc.stdout and "3 runs" in proc.stdout
    page = out.read_text()
    # self-contained: nothing to fetch
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<script" not in page and "<link" not in page

    browser.get(out.as_uri())
    assert browser.title.startswith("hilbench report")
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert len(rows) == 3
    cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")] for row in rows]
    header = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#runs th")]
    assert header == [
        "run",
        "backend",
        "model",
        "config",
        "status",
        "accuracy",
        "forward passes",
        "time",
        "events",
    ]
    by_backend = {c[1]: c for c in cells}
    assert set(by_backend) == {"emulate", "sil"}  # (the stopped run is on emulate too)
    sil = next(c for c in cells if c[1] == "sil")
    assert sil[2] == "mlp on digits" and sil[6] == "400" and sil[4] == "complete"
    assert re.fullmatch(r"\d+\.\d\d%", sil[5]) and sil[7].endswith(" s")
    stopped = next(c for c in cells if "stopped.h5" in c[0])
    assert stopped[4].startswith("complete (stopped: time limit 1 s reached after")
    assert "stop 1" in stopped[8]
    # the unreadable file is named, with why
    assert "notes.h5" in browser.find_element(By.ID, "unreadable").text

    groups = browser.find_element(By.ID, "groups").text
    assert "test_lab.py::test_short_run[*]" in groups
    assert "same on emulate, sil" in groups
    crcs = {Trace.open(p).weights_crc for p in folder.glob("test_lab*.h5")}
    assert len(crcs) == 1 and f"0x{crcs.pop():08x}" in groups

    sections = browser.find_elements(By.CSS_SELECTOR, "section.run")
    assert len(sections) == 3
    for section in sections:
        svgs = section.find_elements(By.TAG_NAME, "svg")
        assert len(svgs) == 2 and all(s.is_displayed() and s.size["width"] > 400 for s in svgs)
        text = section.text
        assert "forward passes" in text and "accuracy (fraction)" in text
        assert "ms (log scale)" in text  # the timing histograms' log axis
        assert re.search(r"p50 [\d.]+ ms", text) and re.search(r"p99 [\d.]+ ms", text)
    # a run's link in the table leads to its section
    link = rows[0].find_element(By.TAG_NAME, "a")
    target = link.get_attribute("href").split("#", 1)[1]
    assert browser.find_element(By.ID, target).tag_name == "section"


def test_all_runs_and_events_in_the_terminal(folder):
    proc = hilbench("report", str(folder), "--all-runs", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout[proc.stdout.index("[") :])
    assert sorted(r["backend"] for r in rows) == ["emulate", "emulate", "sil"]
    assert "skipped" in proc.stdout and "notes.h5" in proc.stdout
    stopped = folder / "cli" / "stopped.h5"
    events = json.loads(hilbench("report", str(stopped), "--events", "--json").stdout)
    assert events["status"] == "complete" and events["error"] is None
    stop = [e for e in events["events"] if e["kind"] == "stop"]
    assert len(stop) == 1 and stop[0]["detail"].startswith("time limit 1 s reached")
    table = hilbench("report", str(stopped), "--events").stdout
    assert "stop" in table and "time limit 1 s" in table


def test_events_json_carries_the_error_of_a_failed_run(tmp_path):
    from hilbench.trace import TraceWriter

    path = tmp_path / "failed.h5"
    with (
        pytest.raises(RuntimeError),
        TraceWriter.create(
            path,
            {
                "backend": "sil",
                "device_id": "x",
                "model": "mlp",
                "model_hash": "0" * 64,
                "dataset": "digits",
                "seed": 0,
                "protocol_version": 1,
                "firmware": "f",
            },
            {"budget": 10},
        ),
    ):
        raise RuntimeError("the device stopped answering: PROBE seq 7")
    proc = hilbench("report", str(path), "--events", "--json")
    out = json.loads(proc.stdout)
    assert out["status"] == "failed"
    assert "the device stopped answering: PROBE seq 7" in out["error"]
    assert any(e["kind"] == "error" for e in out["events"])


def test_bad_html_target_is_one_line(folder, tmp_path):
    proc = hilbench("report", str(folder), "--html", str(tmp_path / "no" / "such" / "r.html"))
    assert proc.returncode == 2 and "cannot write" in proc.stderr
    assert "Traceback" not in proc.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = hilbench("report", str(empty))
    assert proc.returncode == 2 and "holds no readable trace" in proc.stderr
