"""The comparison Space in a real browser: Debian's chromium driven by Playwright (no browser download).

The app runs as the Space runs it (``python spaces/demo/app.py``) on the tiny run of ``tests/_space_run.py``. The
test opens the page, picks a database and an example question, clicks Compare, and checks that both SQL panels
and both result tables render what the adapters answered; screenshots go to ``test-artifacts/`` (gitignored).
Skipped only when chromium is not installed (``.ci/run`` installs it with apt-get).
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
from _space_run import (
    ARTIFACTS,
    DB_ID,
    GRPO_SQL,
    QUESTION,
    REPO,
    SFT_SQL,
    launched_app,
)

# The chromium binary and flags of docs/space_screenshot.py (the README's screenshot).
_SCREENSHOT = runpy.run_path(str(REPO / "docs" / "space_screenshot.py"))
CHROMIUM, CHROMIUM_ARGS = Path(_SCREENSHOT["CHROMIUM"]), _SCREENSHOT["CHROMIUM_ARGS"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.is_file(), reason=f"chromium not installed ({CHROMIUM}): apt-get install chromium"
    ),
]


@pytest.fixture(scope="module")
def app_url(space_run, tmp_path_factory):
    log = tmp_path_factory.mktemp("space-browser") / "app.log"
    with launched_app(["--run-dir", str(space_run)], log) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


def choose(page, dropdown: str, option: str) -> None:
    """Open a gr.Dropdown by its elem_id and click the option whose text contains ``option``."""
    page.locator(f"#{dropdown} input").click()
    page.get_by_role("option").filter(has_text=option).first.click()


def test_pick_an_example_compare_and_both_answers_render(app_url, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        page.goto(app_url)
        page.wait_for_selector("#compare-button", timeout=60_000)

        choose(page, "database", f"{DB_ID} (world)")
        page.wait_for_function("() => document.querySelectorAll('#example input').length > 0", timeout=30_000)
        choose(page, "example", QUESTION)
        question = page.locator("#question textarea")
        page.wait_for_function(
            "q => document.querySelector('#question textarea').value === q", arg=QUESTION, timeout=30_000
        )
        assert question.input_value() == QUESTION

        page.locator("#compare-button").click()
        page.locator("#sft-status").get_by_text("matches gold").wait_for(timeout=120_000)
        page.locator("#grpo-status").get_by_text("wrong").wait_for(timeout=120_000)
        page.wait_for_timeout(500)  # let the tables lay out
        page.screenshot(path=str(ARTIFACTS / "space_compare.png"), full_page=True)

        assert page.locator("#sft-sql .cm-content").inner_text().strip() == SFT_SQL
        assert page.locator("#grpo-sql .cm-content").inner_text().strip() == GRPO_SQL
        assert page.locator("#gold-sql .cm-content").inner_text().strip() == SFT_SQL
        sft_table, grpo_table = page.locator("#sft-result"), page.locator("#grpo-result")
        sft_table.get_by_text("count(*)").filter(visible=True).first.wait_for(timeout=30_000)
        sft_table.get_by_text("70", exact=True).filter(visible=True).first.wait_for(timeout=30_000)
        grpo_table.get_by_text("name", exact=True).filter(visible=True).first.wait_for(timeout=30_000)
        # Rows of each grid, the header row included: SFT's one count, GRPO's 70 names capped at 50.
        assert sft_table.get_by_role("grid").get_attribute("aria-rowcount") == "2"
        assert grpo_table.get_by_role("grid").get_attribute("aria-rowcount") == "51"
        assert grpo_table.get_by_role("row").filter(visible=True).count() > 2
        assert "tokens" in page.locator("#sft-status").inner_text()

        page.get_by_role("tab", name="Evaluation").click()
        # The only question the two disagree on in the tiny run: SFT right, GRPO wrong.
        page.locator("#disagreements").get_by_text(QUESTION).filter(visible=True).first.wait_for(
            timeout=30_000
        )
        page.screenshot(path=str(ARTIFACTS / "space_evaluation.png"), full_page=True)
        page.get_by_role("tab", name="Telemetry").click()
        page.locator("img").first.wait_for(timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "space_telemetry.png"), full_page=True)
    finally:
        page.close()
    assert errors == [], errors
