"""The comparison Space as a person sees it: Debian's chromium driven by Playwright (no browser download).

The app runs as the Space runs it (``python spaces/demo/app.py``) on the tiny run of ``tests/_space_run.py``. At a
desktop width (1400 px) and a phone width (400 px) the test asks a question the two adapters answer differently,
then one on the held-out database where both answers fail, and opens every tab. It asserts on what is on screen:
the SQL formatted and wrapped (no SQL element scrolls sideways), the difference between the answers marked, a
failed answer showing its error and no table, no table with placeholder headers (``1 2 3``), the held-out line.
One screenshot per tab and width goes to ``test-artifacts/`` (gitignored), taken with the helpers of
``docs/space_screenshot.py`` (the README's picture). Skipped only when chromium is not installed (``.ci/run``
installs it with apt-get).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest
from _space_run import ARTIFACTS, DB_ID, DEMO_DIR, GRPO_SQL, QUESTION, REPO, SFT_SQL, launched_app

sys.path.insert(0, str(DEMO_DIR))
from space_sql import format_sql  # noqa: E402

# The chromium binary, its flags and the page helpers of docs/space_screenshot.py (the README's screenshot).
_SCREENSHOT = runpy.run_path(str(REPO / "docs" / "space_screenshot.py"))
CHROMIUM, CHROMIUM_ARGS = Path(_SCREENSHOT["CHROMIUM"]), _SCREENSHOT["CHROMIUM_ARGS"]
WIDTHS, TABS = _SCREENSHOT["WIDTHS"], _SCREENSHOT["TABS"]
ask, open_tab, save_tabs = _SCREENSHOT["ask"], _SCREENSHOT["open_tab"], _SCREENSHOT["save_tabs"]

HELD_OUT = "farm_coop"  # the tiny world's held-out database: no training split has a question on it

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.is_file(), reason=f"chromium not installed ({CHROMIUM}): apt-get install chromium"
    ),
]

# Every SQL element on screen (the answers' and the gold's code boxes, the SQL blocks of the differences and of
# the Evaluation tab) whose content is wider than its box, i.e. that scrolls sideways.
_SQL_OVERFLOW = """() => [...document.querySelectorAll('[id$="-sql"] .cm-scroller, [id$="-sql"] .cm-content, pre.sql')]
    .filter(el => el.offsetParent !== null)
    .filter(el => el.scrollWidth > el.clientWidth + 1)
    .map(el => `${el.closest('[id]')?.id} ${el.className}: ${el.scrollWidth} > ${el.clientWidth}`)"""

# Visible tables whose headers are Gradio's placeholders for an empty value: 1, 2, 3, ...
_PLACEHOLDER_TABLES = """() => [...document.querySelectorAll('table')]
    .filter(t => t.offsetParent !== null)
    .map(t => [...t.querySelectorAll('thead th')].map(th => th.innerText.trim()).filter(Boolean))
    .filter(h => h.length > 0 && h.every((text, i) => text === String(i + 1)))"""


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


def code_text(page, elem_id: str) -> str:
    """The text of a gr.Code box, one line per CodeMirror line."""
    return "\n".join(page.locator(f"#{elem_id} .cm-line").all_inner_texts())


def assert_readable(page, where: str) -> None:
    assert page.evaluate(_SQL_OVERFLOW) == [], f"SQL scrolls sideways ({where})"
    assert page.evaluate(_PLACEHOLDER_TABLES) == [], f"a table with placeholder headers ({where})"


@pytest.mark.parametrize("width_name", list(WIDTHS))
def test_the_space_as_a_person_sees_it(app_url, space_run, browser, width_name):
    from slmsql_hub.data.benchmarks import load_world

    width = WIDTHS[width_name]
    held_out_question = next(
        r["question"] for r in load_world(space_run / "world", "dev") if r["db_id"] == HELD_OUT
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": width, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        page.goto(app_url)
        page.wait_for_selector("#compare-button", timeout=60_000)
        assert_readable(page, "before any question")  # no empty result tables waiting for an answer

        # 1. An example on a trained database: SFT matches the gold, GRPO returns other rows.
        ask(page, f"{DB_ID} (world)", QUESTION, example=True, timeout_ms=120_000)
        assert "matches gold" in page.locator("#sft-status").inner_text()
        assert "wrong" in page.locator("#grpo-status").inner_text()
        assert page.locator("#database-note").inner_text().strip() == ""
        assert code_text(page, "sft-sql") == format_sql(SFT_SQL) != SFT_SQL  # formatted: one clause a line
        assert code_text(page, "grpo-sql") == format_sql(GRPO_SQL)
        assert code_text(page, "gold-sql") == format_sql(SFT_SQL)
        sft_table, grpo_table = page.locator("#sft-result"), page.locator("#grpo-result")
        sft_table.get_by_text("count(*)").filter(visible=True).first.wait_for(timeout=30_000)
        sft_table.get_by_text("70", exact=True).filter(visible=True).first.wait_for(timeout=30_000)
        # Rows of each grid, the header row included: SFT's one count, GRPO's 70 names capped at 50.
        assert sft_table.get_by_role("grid").get_attribute("aria-rowcount") == "2"
        assert grpo_table.get_by_role("grid").get_attribute("aria-rowcount") == "51"
        diff = page.locator("#diff")
        assert "SFT → GRPO" in diff.inner_text()
        assert diff.locator("del").filter(has_text="COUNT(*)").count() >= 1  # SFT's, gone in GRPO's
        assert diff.locator("ins").filter(has_text="name").count() >= 1  # GRPO's instead
        assert_readable(page, f"compare at {width} px")

        # 2. An example on the held-out database: both answers fail; the error shows, no table does.
        ask(page, f"{HELD_OUT} (world)", held_out_question, example=True, timeout_ms=120_000)
        note = page.locator("#database-note")
        assert f"no adapter trained on a question about {HELD_OUT}" in note.inner_text()
        page.locator("#sft-status").get_by_text("no such table").wait_for(timeout=120_000)
        page.locator("#grpo-status").get_by_text("no such table").wait_for(timeout=120_000)
        page.wait_for_timeout(500)
        for name in ("sft", "grpo"):
            assert not page.locator(f"#{name}-result").is_visible(), (
                f"{name}: a table for a query that failed"
            )
            assert page.locator(f"#{name}-sql").is_visible()
        assert page.locator("#gold-result").is_visible() and page.locator("#gold-sql").is_visible()
        assert page.locator("#diff del").count() >= 1  # each answer against this database's gold
        assert_readable(page, f"held-out compare at {width} px")
        page.screenshot(path=str(ARTIFACTS / f"space_compare_error_{width_name}.png"), full_page=True)

        # 3. Every tab, readable, with one screenshot each.
        ask(page, f"{DB_ID} (world)", QUESTION, example=True, timeout_ms=120_000)
        saved = save_tabs(page, ARTIFACTS, width_name)
        assert [p.name for p in saved] == [f"space_{tab.lower()}_{width_name}.png" for tab in TABS]
        open_tab(page, "Evaluation")
        cards = page.locator("#disagreements .card")
        cards.filter(has_text=QUESTION).first.wait_for(timeout=30_000)  # the tiny run's one disagreement
        card = cards.filter(has_text=QUESTION).first
        assert card.locator("pre.sql").count() == 3  # the gold, SFT's and GRPO's, each formatted
        assert card.locator("ins").count() >= 1  # GRPO's SQL against the gold
        assert_readable(page, f"evaluation at {width} px")
        page.get_by_text(
            "every question where the two wrote different SQL"
        ).click()  # the tiny adapters: always
        page.wait_for_function("() => document.querySelectorAll('#disagreements .card').length === 20")
        assert_readable(page, f"evaluation, every different SQL, at {width} px")
        open_tab(page, "Telemetry")
        page.locator("img").first.wait_for(timeout=30_000)
        for tab in ("Ablations", "About"):
            open_tab(page, tab)
            assert_readable(page, f"{tab} at {width} px")
    finally:
        page.close()
    assert errors == [], errors
