"""The dashboard in a real headless Chromium (Debian's ``chromium`` driven through its
``chromedriver`` by Selenium) against a real ``vally serve``: open a run, filter outcomes,
open a trajectory, open an experiment comparison, follow a stimulus's history, compare two
runs, read two graded runs' comparison and one case of them side by side. Screenshots are
kept under ``<pytest basetemp>/screenshots/`` (or ``$VALLY_SCREENSHOT_DIR``)."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.history.conftest import skip_or_fail, vally
from tests.history.graded_runs import BASELINE, CANDIDATE, output_of, write_graded_runs
from tests.history.serving import Served

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
WAIT = 30  # seconds: an upper bound for a page to show; tests wait on conditions

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.select import Select  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def server(
    synthetic_runs: Path, real_runs: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    work = tmp_path_factory.mktemp("browser-store")
    store = str(work / "history.db")
    vally("ingest", str(synthetic_runs), str(real_runs), "--store", store, cwd=work)
    with Served("--store", store, cwd=work) as served:
        assert served.url, served.output
        yield served.url
        served.stop()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(
        os.environ.get("VALLY_SCREENSHOT_DIR") or tmp_path_factory.getbasetemp() / "screenshots"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (shutil.which("chromium") or Path(CHROMIUM).exists()) or not Path(CHROMEDRIVER).exists():
        skip_or_fail(
            "chromium and chromedriver are not installed (scripts/install-viewer-services.sh)"
        )
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-quic",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT)
    yield driver
    driver.quit()


def wait(browser: Any) -> Any:
    """A wait on a condition; an element re-rendered while it is read counts as not yet."""
    return WebDriverWait(browser, WAIT, ignored_exceptions=(StaleElementReferenceException,))


def rows(browser: Any, testid: str) -> list[Any]:
    return browser.find_elements(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def wait_rows(browser: Any, testid: str, count: int | None = None) -> list[Any]:
    if count is None:
        wait(browser).until(lambda b: rows(b, testid))
    else:
        wait(browser).until(lambda b: len(rows(b, testid)) == count)
    return rows(browser, testid)


def wait_ready(browser: Any, route: str) -> None:
    """Wait until the dashboard has shown ``route`` (the part of the URL after ``#``)."""
    wait(browser).until(lambda b: b.execute_script("return document.body.dataset.ready") == route)


def shot(browser: Any, folder: Path, name: str) -> None:
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1400, min(max(int(height), 900), 4000))
    assert browser.save_screenshot(str(folder / f"{name}.png"))
    browser.set_window_size(1400, 1000)


def test_open_a_run(browser: Any, server: str, screenshots: Path) -> None:
    browser.get(server)
    links = wait_rows(browser, "run-link")
    assert len(links) == 5
    next(
        link for link in links if link.text == "suite" and "run-a" in link.get_attribute("href")
    ).click()
    wait(browser).until(
        ec.text_to_be_present_in_element((By.CSS_SELECTOR, '[data-testid="run-title"]'), "suite")
    )
    api = httpx.get(server + "api/runs/run-a", timeout=30).json()["run"]
    pass_rate = browser.find_element(By.CSS_SELECTOR, '[data-testid="stat-pass-rate"] .value')
    assert pass_rate.text == f"{api['passRate'] * 100:.1f}%"
    trials = browser.find_element(By.CSS_SELECTOR, '[data-testid="stat-trials"] .value')
    assert trials.text == "24"
    bars = browser.find_elements(By.CSS_SELECTOR, '[data-testid="duration-chart"] rect')
    assert bars
    assert len(wait_rows(browser, "matrix-row", 4)) == 4
    assert wait_rows(browser, "grader-row") and wait_rows(browser, "tool-row")
    assert len(wait_rows(browser, "ranking-row", 2)) == 2
    wait_rows(browser, "outcome-row")
    shot(browser, screenshots, "run")


def test_filter_outcomes(browser: Any, server: str, screenshots: Path) -> None:
    browser.get(server + "#/runs/run-a")
    wait_rows(browser, "outcome-row")
    expected = httpx.get(
        server + "api/runs/run-a/outcomes", params={"verdict": "fail", "model": "gpt-b"}, timeout=30
    ).json()
    Select(browser.find_element(By.CSS_SELECTOR, '[data-testid="verdict-filter"]')).select_by_value(
        "fail"
    )
    Select(browser.find_element(By.CSS_SELECTOR, '[data-testid="column-filter"]')).select_by_value(
        "gpt-b"
    )
    total = expected["page"]["total"]
    wait(browser).until(
        ec.text_to_be_present_in_element(
            (By.CSS_SELECTOR, '[data-testid="outcomes-panel"] [data-testid="page-info"]'),
            f"of {total}",
        )
    )
    shown = rows(browser, "outcome-row")
    assert len(shown) == min(total, 25)
    assert {r.get_attribute("data-verdict") for r in shown} <= {"fail"}
    shot(browser, screenshots, "outcomes-filtered")


def test_open_a_trajectory(browser: Any, server: str, screenshots: Path) -> None:
    browser.get(server + "#/runs/run-a")
    Select(
        wait(browser).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="verdict-filter"]'))
        )
    ).select_by_value("fail")
    wait(browser).until(
        lambda b: (
            rows(b, "outcome-row")
            and all(r.get_attribute("data-verdict") == "fail" for r in rows(b, "outcome-row"))
        )
    )
    rows(browser, "outcome-link")[0].click()
    wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, '[data-testid="outcome-title"]'))
    )
    events = wait_rows(browser, "event")
    types = [e.get_attribute("data-type") for e in events]
    assert types[0] == "user_message" and "tool_call" in types and "reasoning" in types
    arguments = rows(browser, "tool-arguments")[0].text
    assert '"path": "src/file0.py"' in arguments
    evidence = rows(browser, "grader-detail")[0].text
    assert "'done' not in the output" in evidence
    assert "notes.txt" in browser.find_element(By.CSS_SELECTOR, '[data-testid="artifacts"]').text
    shot(browser, screenshots, "trajectory")


def test_open_an_experiment_comparison(browser: Any, server: str, screenshots: Path) -> None:
    browser.get(server + "#/runs/exp-1")
    wait(browser).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, '[data-testid="experiment-link"]'))
    ).click()
    variants = wait_rows(browser, "variant-row", 3)
    assert [v.get_attribute("data-variant") for v in variants] == ["baseline", "better", "worse"]
    assert "baseline" in variants[0].text
    api = httpx.get(server + "api/runs/exp-1/experiment", timeout=30).json()
    worse = next(v for v in api["variants"] if v["name"] == "worse")
    delta = worse["deltas"]["passRate"]["delta"]
    assert f"{delta * 100:.1f}%" in variants[2].text
    assert browser.find_elements(By.CSS_SELECTOR, '[data-testid="delta-chart"] circle')
    shot(browser, screenshots, "experiment")


def test_stimulus_history_and_run_comparison(browser: Any, server: str, screenshots: Path) -> None:
    browser.get(server + "#/history?stimulus=task-000&eval=suite")
    assert len(wait_rows(browser, "history-row", 3)) == 3
    assert len(browser.find_elements(By.CSS_SELECTOR, '[data-testid="history-chart"] circle')) == 3
    shot(browser, screenshots, "history")
    browser.get(server + "#/")
    for row in wait_rows(browser, "run-row"):
        if row.get_attribute("data-run-id") in ("run-a", "run-b"):
            row.find_element(By.CSS_SELECTOR, "input[type=checkbox]").click()
    browser.find_element(By.CSS_SELECTOR, '[data-testid="compare-runs"]').click()
    assert len(wait_rows(browser, "compare-row", 8)) == 8
    shot(browser, screenshots, "compare")


@pytest.fixture(scope="module")
def graded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("graded-store")
    runs = write_graded_runs(work / "runs")
    store = str(work / "history.db")
    vally("ingest", str(runs), "--store", store, cwd=work)
    with Served("--store", store, cwd=work) as served:
        assert served.url, served.output
        yield served.url
        served.stop()


def test_graded_comparison_of_two_runs(browser: Any, graded_server: str, screenshots: Path) -> None:
    browser.get(f"{graded_server}#/compare?runs={BASELINE},{CANDIDATE}")
    graders = wait_rows(browser, "graded-grader-row", 2)
    assert [g.get_attribute("data-grader") for g in graders] == ["correct", "style"]
    api = httpx.get(
        graded_server + "api/compare/graded",
        params={"baseline": BASELINE, "candidate": CANDIDATE},
        timeout=30,
    ).json()
    for row, figure in zip(graders, api["graders"], strict=True):
        cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
        assert cells[1].startswith(f"{figure['baselineMean']:.3f}")
        assert cells[2].startswith(f"{figure['candidateMean']:.3f}")
        assert cells[5] == str(figure["paired"]) and cells[6] == figure["difference"]
        low = figure["interval"]["low"]
        assert f"{low:.3f}" in cells[4]
    style = graders[1].find_elements(By.TAG_NAME, "td")
    assert style[3].text == f"{api['graders'][1]['delta']:.3f}"
    heading = browser.find_element(By.CSS_SELECTOR, '[data-testid="graded-graders"] thead')
    assert "Interval (95%)" in heading.text
    pass_to_fail = browser.find_element(By.CSS_SELECTOR, '[data-testid="flips-pass-to-fail"]')
    assert pass_to_fail.text == "pass→fail: checkout/login"
    fail_to_pass = browser.find_element(By.CSS_SELECTOR, '[data-testid="flips-fail-to-pass"]')
    assert fail_to_pass.text == "fail→pass: checkout/search"
    cases = {r.get_attribute("data-case-id"): r for r in rows(browser, "graded-case-row")}
    assert set(cases) == {"checkout/login", "checkout/polish", "checkout/search", "checkout/tidy"}
    assert cases["checkout/tidy"].get_attribute("data-outcome") == "regressed"
    assert "mean grader change -0.375" in cases["checkout/tidy"].text
    assert cases["checkout/polish"].get_attribute("data-outcome") == "improved"
    missing = browser.find_element(By.CSS_SELECTOR, '[data-testid="graded-missing"] .value')
    assert missing.text == "1"
    failed = browser.find_element(By.CSS_SELECTOR, '[data-testid="graded-failed"] .value')
    assert failed.text == "0 / 0"
    warnings = [w.text for w in rows(browser, "graded-warning")]
    assert warnings == api["warnings"] and any("checkout/legacy" in w for w in warnings)
    shot(browser, screenshots, "compare-graded")

    cases["checkout/tidy"].find_element(By.CSS_SELECTOR, '[data-testid="case-link"]').click()
    wait(browser).until(
        ec.text_to_be_present_in_element(
            (By.CSS_SELECTOR, '[data-testid="case-title"]'), "checkout/tidy"
        )
    )
    sides = wait_rows(browser, "case-side", 2)
    assert [s.get_attribute("data-run-id") for s in sides] == [BASELINE, CANDIDATE]
    for side, run_id in zip(sides, (BASELINE, CANDIDATE), strict=True):
        outputs = side.find_elements(By.CSS_SELECTOR, '[data-testid="case-output"]')
        assert len(outputs) == 2
        assert all(o.is_displayed() and o.text == output_of(run_id, "tidy") for o in outputs)
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="case-side"] b')
    shot(browser, screenshots, "compare-graded-case")


def _outcome_with_failed_tool(server: str) -> tuple[str, int]:
    """An outcome of run-a whose trajectory holds a failed tool result, and how many."""
    listed = httpx.get(server + "api/runs/run-a/outcomes", params={"limit": 200}, timeout=30)
    for outcome in listed.json()["outcomes"]:
        path = f"{server}api/outcomes/{outcome['id']}/trajectory"
        found = httpx.get(path, params={"q": "permission denied"}, timeout=30).json()
        if found["page"]["total"]:
            return outcome["id"], found["page"]["total"]
    raise AssertionError("no trial of run-a has a failed tool result")


def test_tool_calls_are_folded_with_their_results(
    browser: Any, server: str, screenshots: Path
) -> None:
    outcome_id, _failed = _outcome_with_failed_tool(server)
    events = httpx.get(f"{server}api/outcomes/{outcome_id}/trajectory", timeout=30).json()
    calls = [e for e in events["events"] if e["type"] == "tool_call"]
    results = {e["data"]["toolCallId"]: e for e in events["events"] if e["type"] == "tool_result"}
    browser.get(f"{server}#/outcomes/{outcome_id}")
    wait_ready(browser, f"/outcomes/{outcome_id}")
    cards = wait_rows(browser, "event")
    types = [c.get_attribute("data-type") for c in cards]
    assert "tool_result" not in types and types.count("tool_call") == len(calls)
    folded = [c for c in cards if c.get_attribute("data-type") == "tool_call"]
    for card, call in zip(folded, calls, strict=True):
        call_id = call["data"]["toolCallId"]
        assert card.get_attribute("data-tool-call-id") == call_id
        inner = card.find_element(By.CSS_SELECTOR, '[data-testid="tool-result"]')
        assert inner.text.endswith(results[call_id]["data"]["result"])
        verdict = "fail" if results[call_id]["data"]["success"] is False else "pass"
        assert inner.find_element(By.CSS_SELECTOR, ".badge").text == verdict
    shot(browser, screenshots, "trajectory-folded")


def test_search_inside_a_transcript(browser: Any, server: str, screenshots: Path) -> None:
    outcome_id, failed = _outcome_with_failed_tool(server)
    browser.get(f"{server}#/outcomes/{outcome_id}")
    wait_ready(browser, f"/outcomes/{outcome_id}")
    wait_rows(browser, "event")
    search = browser.find_element(By.CSS_SELECTOR, '[data-testid="transcript-search"]')
    search.send_keys("Permission DENIED\n")
    wait(browser).until(
        ec.text_to_be_present_in_element(
            (By.CSS_SELECTOR, '[data-testid="transcript-matches"]'), f"{failed} event"
        )
    )
    marks = wait_rows(browser, "transcript-mark")
    assert len(marks) == failed and {m.text for m in marks} == {"permission denied"}
    search.clear()
    search.send_keys("nothing like this\n")
    wait_rows(browser, "transcript-empty", 1)
    assert not rows(browser, "event")
    shot(browser, screenshots, "trajectory-search")


def test_previous_and_next_trial(browser: Any, server: str) -> None:
    listed = httpx.get(server + "api/runs/run-a/outcomes", params={"limit": 3}, timeout=30)
    first, second, third = listed.json()["outcomes"]
    browser.get(f"{server}#/outcomes/{second['id']}")
    wait_ready(browser, f"/outcomes/{second['id']}")
    browser.find_element(By.CSS_SELECTOR, '[data-testid="next-trial"]').click()
    wait_ready(browser, f"/outcomes/{third['id']}")
    title = browser.find_element(By.CSS_SELECTOR, '[data-testid="outcome-title"]').text
    assert title.startswith(third["stimulus"])
    assert third["trialId"] in browser.find_element(By.CSS_SELECTOR, ".sub").text
    browser.find_element(By.CSS_SELECTOR, '[data-testid="prev-trial"]').click()
    wait_ready(browser, f"/outcomes/{second['id']}")
    browser.find_element(By.CSS_SELECTOR, '[data-testid="prev-trial"]').click()
    wait_ready(browser, f"/outcomes/{first['id']}")
    first_prev = browser.find_element(By.CSS_SELECTOR, '[data-testid="prev-trial"]')
    assert first_prev.tag_name == "span" and first_prev.get_attribute("aria-disabled") == "true"


def _side_rows(browser: Any) -> list[Any]:
    return rows(browser, "side-row")


def test_one_case_trial_by_trial_with_differences_only(
    browser: Any, graded_server: str, screenshots: Path
) -> None:
    browser.get(f"{graded_server}#/compare?runs={BASELINE},{CANDIDATE}")
    tidy = next(
        r
        for r in wait_rows(browser, "graded-case-row", 4)
        if r.get_attribute("data-case-id") == "checkout/tidy"
    )
    tidy.find_element(By.CSS_SELECTOR, '[data-testid="case-link"]').click()
    wait(browser).until(ec.element_to_be_clickable((By.CSS_SELECTOR, '[data-testid="side-link"]')))
    rows(browser, "side-link")[0].click()
    assert len(wait_rows(browser, "side-trial", 2)) == 2
    left = browser.find_element(By.CSS_SELECTOR, '[data-testid="side-left"]').text
    right = browser.find_element(By.CSS_SELECTOR, '[data-testid="side-right"]').text
    assert left.endswith(BASELINE) and right.endswith(CANDIDATE)
    table = _side_rows(browser)
    by_kind: dict[str, list[Any]] = {}
    for row in table:
        by_kind.setdefault(row.get_attribute("data-kind"), []).append(row)
    outputs = by_kind["output"]
    assert len(outputs) == 2
    for row in outputs:
        cells = row.find_elements(By.TAG_NAME, "td")
        assert [c.text for c in cells] == [
            output_of(BASELINE, "tidy"),
            output_of(CANDIDATE, "tidy"),
        ]
        assert row.get_attribute("data-same") == "false"
    graders = {}
    for row in by_kind["grader"]:
        name = row.find_element(By.TAG_NAME, "th").text
        graders.setdefault(name, []).append([c.text for c in row.find_elements(By.TAG_NAME, "td")])
    assert graders == {
        "correct": [["pass · 1.00", "pass · 1.00"]] * 2,
        "style": [["pass · 1.00", "fail · 0.25"]] * 2,
    }
    assert not browser.find_elements(By.CSS_SELECTOR, '[data-testid="side-by-side"] b')
    steps = by_kind["step"]
    assert steps[0].get_attribute("data-same") == "true"  # the same prompt on both sides
    assert "Solve task tidy." in steps[0].text
    assert all(r.is_displayed() for r in table)
    shot(browser, screenshots, "side-by-side")

    browser.find_element(By.CSS_SELECTOR, '[data-testid="diff-only"]').click()
    wait(browser).until(lambda b: not steps[0].is_displayed())
    shown = [r for r in table if r.is_displayed()]
    assert shown == [r for r in table if r.get_attribute("data-same") == "false"]
    kept = {
        r.find_element(By.TAG_NAME, "th").text
        for r in shown
        if r.get_attribute("data-kind") == "grader"
    }
    assert kept == {"style"}
    assert len(rows(browser, "side-trial")) == 2 and all(
        r.is_displayed() for r in rows(browser, "side-trial")
    )
    shot(browser, screenshots, "side-by-side-differences")


def test_an_experiment_cell_opens_its_trials_beside_the_baseline(browser: Any, server: str) -> None:
    browser.get(server + "#/runs/exp-1/experiment")
    wait_rows(browser, "matrix-row")
    links = wait_rows(browser, "matrix-side-link")
    assert len(links) == 8 * 2  # 8 stimuli x the 2 variants that are not the baseline
    target = links[-1]
    href = target.get_attribute("href")
    assert "rightVariant=worse" in href and "leftVariant=baseline" in href
    target.click()
    assert len(wait_rows(browser, "side-trial", 4)) == 4
    assert browser.find_element(By.CSS_SELECTOR, '[data-testid="side-left"]').text.endswith(
        "baseline"
    )
    assert browser.find_element(By.CSS_SELECTOR, '[data-testid="side-right"]').text.endswith(
        "worse"
    )
    assert browser.find_element(By.CSS_SELECTOR, '[data-testid="side-title"]').text.startswith(
        "task-007"
    )


def _downloaded(folder: Path, name: str) -> Path:
    """Wait for the browser to finish downloading ``name`` into ``folder``."""
    target = folder / name
    wait_seconds = WebDriverWait(None, WAIT)
    wait_seconds.until(lambda _: target.exists() and target.stat().st_size > 0)
    return target


def _shown_durations(browser: Any) -> list[str]:
    table = browser.find_element(By.CSS_SELECTOR, '[data-testid="outcomes-table"]')
    return [r.find_elements(By.TAG_NAME, "td")[7].text for r in rows(table, "outcome-row")]


def test_sort_a_table_and_download_it(
    browser: Any, server: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path_factory.mktemp("downloads")
    browser.execute_cdp_cmd(
        "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)}
    )
    browser.get(server + "#/runs/run-a")
    wait_ready(browser, "/runs/run-a")
    wait_rows(browser, "outcome-row", 24)
    listed = httpx.get(server + "api/runs/run-a/outcomes", params={"limit": 25}, timeout=30)
    outcomes = listed.json()["outcomes"]
    header = browser.find_element(
        By.CSS_SELECTOR, '[data-testid="outcomes-table"] th[data-column="7"]'
    )
    assert header.text == "Duration"
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    ascending = sorted(outcomes, key=lambda o: o["durationMs"])
    shown = _shown_durations(browser)
    ids = [
        link.get_attribute("href").rsplit("/", 1)[-1]
        for link in browser.find_elements(
            By.CSS_SELECTOR, '[data-testid="outcomes-table"] [data-testid="outcome-link"]'
        )
    ]
    assert ids == [o["id"] for o in ascending], shown
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    ids = [
        link.get_attribute("href").rsplit("/", 1)[-1]
        for link in browser.find_elements(
            By.CSS_SELECTOR, '[data-testid="outcomes-table"] [data-testid="outcome-link"]'
        )
    ]
    assert ids == [o["id"] for o in reversed(ascending)]

    panel = browser.find_element(By.CSS_SELECTOR, '[data-testid="outcomes-panel"]')
    panel.find_element(By.CSS_SELECTOR, '[data-testid="download-json"]').click()
    records = json.loads(_downloaded(folder, "outcomes.json").read_text(encoding="utf-8"))
    assert [r["Stimulus"] for r in records] == [o["stimulus"] for o in reversed(ascending)]
    assert [int(r["#"]) for r in records] == [o["trialIndex"] for o in reversed(ascending)]
    assert set(records[0]) == {
        "Stimulus", "Eval", "Model", "Variant", "#", "Verdict", "Score", "Duration", "Tokens",
        "Calls",
    }  # fmt: skip
    assert [r["Verdict"] for r in records] == [o["verdict"] for o in reversed(ascending)]

    ranking = httpx.get(server + "api/runs/run-a/ranking", timeout=30).json()["entries"]
    box = browser.find_element(By.CSS_SELECTOR, '[data-testid="ranking-table"]')
    box.find_element(By.XPATH, "..").find_element(
        By.CSS_SELECTOR, '[data-testid="download-csv"]'
    ).click()
    lines = list(csv.reader(_downloaded(folder, "ranking.csv").open(encoding="utf-8")))
    assert lines[0] == [
        "Rank", "Model", "Pass rate", "pass@k", "Mean score", "Trials", "Errored", "Duration",
        "Tokens",
    ]  # fmt: skip
    assert [(int(x[0]), x[1], x[2]) for x in lines[1:]] == [
        (e["rank"], e["name"], f"{e['passRate'] * 100:.1f}%") for e in ranking
    ]


def test_filter_outcomes_by_grader_and_by_error_text(browser: Any, server: str) -> None:
    browser.get(server + "#/runs/run-a")
    wait_ready(browser, "/runs/run-a")
    wait_rows(browser, "outcome-row")
    info = '[data-testid="outcomes-panel"] [data-testid="page-info"]'

    def expect(params: dict[str, str]) -> list[Any]:
        body = httpx.get(server + "api/runs/run-a/outcomes", params=params, timeout=30).json()
        wanted = [o["id"] for o in body["outcomes"][:25]]

        def shown_ids(b: Any) -> list[str]:
            links = b.find_elements(
                By.CSS_SELECTOR, '[data-testid="outcome-row"] [data-testid="outcome-link"]'
            )
            return [a.get_attribute("href").rsplit("/", 1)[-1] for a in links]

        wait(browser).until(lambda b: shown_ids(b) == wanted)
        page_info = browser.find_element(By.CSS_SELECTOR, info).text
        assert page_info.endswith(f"of {body['page']['total']}")
        return rows(browser, "outcome-row")

    grader = Select(browser.find_element(By.CSS_SELECTOR, '[data-testid="grader-filter"]'))
    assert [o.get_attribute("value") for o in grader.options] == ["", "output-contains"]
    grader.select_by_value("output-contains")
    failing = expect({"grader": "output-contains", "graderVerdict": "fail", "limit": "25"})
    assert failing and {r.get_attribute("data-verdict") for r in failing} == {"fail"}
    Select(
        browser.find_element(By.CSS_SELECTOR, '[data-testid="grader-verdict-filter"]')
    ).select_by_value("pass")
    passing = expect({"grader": "output-contains", "graderVerdict": "pass", "limit": "25"})
    assert passing and {r.get_attribute("data-verdict") for r in passing} == {"pass"}
    grader.select_by_value("")
    errors = browser.find_element(By.CSS_SELECTOR, '[data-testid="error-filter"]')
    errors.send_keys("timed OUT\n")
    errored = expect({"error": "timed OUT", "limit": "25"})
    assert errored and {r.get_attribute("data-verdict") for r in errored} == {"error"}


def test_the_ranking_shows_its_last_column(browser: Any, server: str, screenshots: Path) -> None:
    browser.get(server + "#/runs/run-a")
    wait_ready(browser, "/runs/run-a")
    wait_rows(browser, "ranking-row", 2)
    panel = browser.find_element(By.CSS_SELECTOR, '[data-testid="ranking-panel"]')
    last = panel.find_elements(By.CSS_SELECTOR, "thead th")[-1]
    assert last.text == "Tokens"
    fits = browser.execute_script(
        "const p = arguments[0], th = arguments[1];"
        "return [p.scrollWidth - p.clientWidth,"
        " p.getBoundingClientRect().right - th.getBoundingClientRect().right];",
        panel,
        last,
    )
    overflow, margin = fits
    assert overflow <= 0, f"the ranking is {overflow}px wider than its card"
    assert margin >= 0, f"its last column ends {-margin}px outside the card"
    shot(browser, screenshots, "run-ranking")


def test_a_variant_trial_opens_its_stimulus_beside_the_baseline(browser: Any, server: str) -> None:
    listed = httpx.get(
        server + "api/runs/exp-1/outcomes", params={"variant": "better", "limit": 1}, timeout=30
    ).json()["outcomes"][0]
    browser.get(f"{server}#/outcomes/{listed['id']}")
    wait_ready(browser, f"/outcomes/{listed['id']}")
    wait(browser).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, '[data-testid="beside-baseline-link"]'))
    ).click()
    assert len(wait_rows(browser, "side-trial", 4)) == 4
    left = browser.find_element(By.CSS_SELECTOR, '[data-testid="side-left"]').text
    assert left.endswith("baseline")
    assert browser.find_element(By.CSS_SELECTOR, '[data-testid="side-right"]').text.endswith(
        "better"
    )
    title = browser.find_element(By.CSS_SELECTOR, '[data-testid="side-title"]').text
    assert title.startswith(listed["stimulus"])
