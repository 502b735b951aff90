"""The dashboard in a real browser: Debian's chromium driven by Playwright's Python client.

Skipped, saying why, where chromium or Playwright is missing; CI installs both and sets
``KTUNE_REQUIRE_BROWSER``, which turns the skip into a failure.
"""

from __future__ import annotations

import io
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ktune.testing.recordings import PNPOLY
from tests.server.client import AUTH
from tests.server.live import Server

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("KTUNE_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = Path(__file__).resolve().parents[2] / "out" / "screenshots"


def _unavailable() -> str | None:
    if not Path(CHROMIUM).exists() and shutil.which("chromium") is None:
        return f"no chromium at {CHROMIUM} (apt-get install chromium; `make test` does it as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright's Python client is not installed (pip install playwright)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    reason = _unavailable()
    if reason:
        if os.environ.get("KTUNE_REQUIRE_BROWSER"):
            pytest.fail(f"KTUNE_REQUIRE_BROWSER is set but {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
        launched = playwright.chromium.launch(executable_path=executable, args=ARGS)
        yield launched
        launched.close()


def _pixels_vary(png: bytes) -> float:
    """Standard deviation of the grey levels of a screenshot: ~0 for a blank page."""
    import numpy as np
    from PIL import Image

    grey = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return float(grey.std())


def _job_with_predictions(path: Path) -> int:
    """A finished job of 12 trials, each with a predicted time, written through the log.

    Created running without a lease (as ``ktune tune`` does), so the server's runner leaves it.
    """
    from ktune.db import JobSpec, TrialIn, TuningLog
    from ktune.tuner.sources import ReplaySource, bundled_recordings

    source = ReplaySource.open(bundled_recordings()[PNPOLY])
    wl = source.workload
    with TuningLog.open(f"sqlite:///{path}") as tlog:
        device = tlog.get_or_create_device(source.recording.device_name)
        workload = tlog.get_or_create_workload(
            wl.key, wl.operator, wl.shape, space=source.space.to_dict()
        )
        spec = JobSpec(
            workload.id,
            device.id,
            "replay",
            "random",
            0,
            4,
            12,
            None,
            None,
            source.options.to_json(),
        )
        job = tlog.create_job(spec, state="running")
        rows = [
            TrialIn(
                config=c,
                config_key=source.space.key(c),
                status="ok",
                time_ms=5.0 + i,
                predicted=4.0 + 1.2 * i,
                seq=i,
                clock_s=float(i),
            )
            for i, c in enumerate(source.space.configs(list(range(12))))
        ]
        tlog.add_trials(job.id, workload.id, device.id, "replay", rows, clock_s=12.0)
        tlog.set_job_state(job.id, "done")
        return job.id


def test_dashboard_shows_convergence_and_follows_a_running_job(
    browser: Any, tmp_path: Path
) -> None:
    with Server(f"sqlite:///{tmp_path / 'dash.db'}", concurrency=2) as server:
        post = lambda body: server.http.post("/v1/jobs", json=body, headers=AUTH).json()
        done = post({"space": PNPOLY, "strategy": "optuna", "seed": 1, "budget": {"trials": 80}})
        post({"space": PNPOLY, "strategy": "random", "seed": 1, "budget": {"trials": 80}})
        # About 24 ms of real time per measurement: runs for a while as the page watches.
        live = post(
            {
                "space": PNPOLY,
                "strategy": "random",
                "seed": 2,
                "budget": {"trials": 2000},
                "replay_speed": 10,
            }
        )
        deadline = time.monotonic() + 60
        while server.job(done["id"])["state"] != "done":
            assert time.monotonic() < deadline, "the first job did not finish"
            time.sleep(0.05)
        trials = server.http.get(f"/v1/jobs/{done['id']}/trials", params={"limit": 5000}).json()[
            "items"
        ]
        n_ok = sum(t["status"] == "ok" for t in trials)
        n_failed = len(trials) - n_ok
        assert n_failed > 0  # pnpoly has configs that fail at run time: both kinds are drawn

        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)

        page.goto(server.url)
        page.wait_for_selector("#jobs-table tbody tr")
        assert page.locator("#jobs-table tbody tr").count() == 3
        assert (
            page.locator(f'#jobs-table tr[data-job="{done["id"]}"] .badge').inner_text() == "done"
        )

        plot = "#plot-measurements"

        def open_job(job_id: int) -> None:
            """Go to a job's page and wait until that job's plot is drawn (not the last page's)."""
            page.goto(f"{server.url}#/jobs/{job_id}")
            page.wait_for_function(
                "document.querySelector('h1') && "
                f"document.querySelector('h1').textContent.startsWith('Job #{job_id} ')"
                f" && document.querySelector('{plot} svg circle.pt') !== null"
            )

        open_job(done["id"])
        assert page.locator(f"{plot} circle.status-ok").count() == n_ok
        assert page.locator(f"{plot} path.pt.failed").count() == n_failed
        assert page.locator(f"{plot} path.best-so-far").count() == 1
        assert page.locator(f"{plot} line.hline").count() == 1  # the recording's optimum
        assert page.locator("#plot-time svg circle.pt").count() == n_ok
        assert page.locator("#best-configs tbody tr").count() == 10
        SHOTS.mkdir(parents=True, exist_ok=True)
        shot = page.screenshot(path=str(SHOTS / "job.png"), full_page=True)
        assert _pixels_vary(shot) > 10

        open_job(live["id"])
        drawn = lambda: page.locator(f"{plot} .pt").count()
        before = drawn()
        page.wait_for_function(
            f"document.querySelectorAll('{plot} .pt').length >= {before + 20}", timeout=20_000
        )
        assert drawn() > before
        page.screenshot(path=str(SHOTS / "live.png"), full_page=True)

        # A job whose trials carry the cost model's predictions gets the measured-vs-predicted plot.
        predicted = _job_with_predictions(tmp_path / "dash.db")
        open_job(predicted)
        page.wait_for_selector("#plot-predicted svg circle.pt")
        assert page.locator("#plot-predicted circle.pt").count() == 12
        assert page.locator("#plot-predicted line.diagonal").count() == 1
        page.screenshot(path=str(SHOTS / "predicted.png"), full_page=True)
        open_job(done["id"])
        assert page.locator("#plot-predicted").count() == 0  # no predictions, no such plot
        # A real job of a model-guided strategy records its predictions: the plot shows.
        guided = post({"space": PNPOLY, "strategy": "auto", "seed": 1, "budget": {"trials": 32}})
        deadline = time.monotonic() + 120
        while server.job(guided["id"])["state"] != "done":
            assert time.monotonic() < deadline, "the auto job did not finish"
            time.sleep(0.1)
        items = server.http.get(f"/v1/jobs/{guided['id']}/trials").json()["items"]
        pairs = [t for t in items if t["predicted"] is not None and t["time_ms"] is not None]
        assert pairs
        open_job(guided["id"])
        page.wait_for_selector("#plot-predicted svg circle.pt")
        assert page.locator("#plot-predicted circle.pt").count() == len(pairs)

        page.goto(f"{server.url}#/compare?jobs={done['id']},{live['id']}")
        page.wait_for_selector("#compare-measurements svg path.series")
        assert page.locator("#compare-measurements path.series").count() == 2
        shot = page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)
        assert _pixels_vary(shot) > 10
        assert errors == []
        server.http.post(f"/v1/jobs/{live['id']}/cancel", headers=AUTH)
        page.close()


def test_api_docs_render_offline_from_the_servers_own_assets(browser: Any, tmp_path: Path) -> None:
    """``/docs`` draws every route with no request leaving the server (no CDN)."""
    with Server(f"sqlite:///{tmp_path / 'docs.db'}", concurrency=0) as server:
        page = browser.new_page()
        elsewhere: list[str] = []

        def only_the_server(route: Any) -> None:
            if route.request.url.startswith(server.url):
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        page.route("**/*", only_the_server)
        page.goto(f"{server.url}docs")
        page.wait_for_selector(".opblock-summary-path")
        paths = {p.get_attribute("data-path") for p in page.locator(".opblock-summary-path").all()}
        assert {"/v1/jobs", "/v1/best"} <= paths
        assert elsewhere == []
        page.close()
