"""Take the screenshot of the comparison Space (``docs/space.png``, shown in ``docs/space.md``) on a run folder, and
optionally one screenshot per tab at a desktop and a phone width.

It serves ``spaces/demo/app.py`` on a free local port, opens it in Debian's chromium through Playwright
(headless, no browser download), picks a database and a question, clicks Compare, waits for both answers, and
saves a full-page screenshot of the Compare tab::

    python docs/space_screenshot.py --run-dir outputs/quickstart --out docs/space.png
    python docs/space_screenshot.py --run-dir outputs/quickstart --tabs-dir test-artifacts
    python docs/space_screenshot.py --run-dir outputs/quickstart --database world/library --question "How many ..."

Without ``--question`` it asks an evaluated example on which SFT and GRPO write different SQL (the page's
point), else the database's first example. The browser helpers here (:func:`choose`, :func:`ask`, :func:`save_tabs`)
are the ones ``tests/test_space_browser.py`` drives the page with.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/lib/chromium/chromium"  # the Debian binary; /usr/bin/chromium is a wrapper script
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TABS = ("Compare", "Telemetry", "Evaluation", "Ablations", "About")
WIDTHS = {"desktop": 1400, "phone": 400}

logger = logging.getLogger("space_screenshot")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def choose(page, dropdown: str, option: str) -> None:
    """Open a gr.Dropdown by its elem_id and click the option whose text contains ``option``."""
    page.locator(f"#{dropdown} input").click()
    page.get_by_role("option").filter(has_text=option).first.click()


def ask(page, database_label: str, question: str, example: bool, timeout_ms: int = 600_000) -> None:
    """Pick the database, then the example question (or type the question), click Compare and wait for both
    answers' status lines."""
    choose(page, "database", database_label)
    page.wait_for_timeout(800)  # the pick reloads the examples and the schema
    if example:
        page.wait_for_function("() => document.querySelectorAll('#example input').length > 0", timeout=30_000)
        choose(page, "example", question)
    else:
        page.locator("#question textarea").fill(question)
    page.wait_for_function(
        "q => document.querySelector('#question textarea').value === q", arg=question, timeout=30_000
    )
    before = page.locator("#sft-status").inner_text()
    page.locator("#compare-button").click()
    page.wait_for_function(
        "prev => ['sft', 'grpo'].every(n => { const t = document.querySelector(`#${n}-status`).innerText;"
        " return t.includes('tokens') && t !== prev; })",
        arg=before,
        timeout=timeout_ms,
    )
    page.wait_for_timeout(500)  # let the tables and the code lay out


def open_tab(page, tab: str) -> None:
    """Click a tab (on a narrow screen, through Gradio's "More tabs" menu) and give it a moment to draw."""
    button = page.get_by_role("tab", name=tab)
    if button.count() and button.first.is_visible():
        button.first.click()
    else:
        page.get_by_label("More tabs").click()
        page.locator(".overflow-dropdown button").filter(has_text=tab).first.click()
    page.wait_for_timeout(700)


def save_tabs(page, out_dir: Path, suffix: str) -> list[Path]:
    """One full-page screenshot per tab, ``space_<tab>_<suffix>.png`` in ``out_dir``; ends on the Compare tab."""
    out_dir.mkdir(parents=True, exist_ok=True)
    saved = []
    for tab in TABS:
        open_tab(page, tab)
        path = out_dir / f"space_{tab.lower()}_{suffix}.png"
        page.screenshot(path=str(path), full_page=True)
        saved.append(path)
    open_tab(page, TABS[0])
    return saved


def _default_question(space, key: str | None, tries: int = 20) -> tuple[str | None, str | None]:
    """An evaluated example question on which SFT and GRPO wrote different SQL (one only of them right first),
    asked again here until the live answers differ too (at most ``tries``); else ``key``'s (or the first
    database's) first example."""
    from slmsql_hub.run.files import read_jsonl

    data = space.data
    records = []
    for name, bench in (data.eval_results or {}).get("benchmarks", {}).items():
        path = Path(data.eval_dir or ".") / (bench.get("predictions_file") or f"predictions/{name}.jsonl")
        records += read_jsonl(path) if path.is_file() else []
    records = [r for r in records if r.get("sft_sql") != r.get("grpo_sql")]
    records.sort(key=lambda r: r.get("sft_correct") == r.get("grpo_correct"))
    candidates = [
        (f"world/{r.get('db_id')}", r["question"])
        for r in records
        if (key is None or key == f"world/{r.get('db_id')}")
        and space.find_example(f"world/{r.get('db_id')}", r["question"]) is not None
    ]
    for candidate, question in candidates[:tries]:
        answers = space.compare(candidate, question).answers
        if answers["sft"].sql != answers["grpo"].sql:
            return candidate, question
    key = key or next((k for k in data.databases if space.examples(k)), None)
    examples = space.examples(key) if key else []
    return key, examples[0].question if examples else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run-dir", default="outputs/quickstart", help="the run folder (default outputs/quickstart)"
    )
    parser.add_argument("--out", default=str(REPO / "docs" / "space.png"), help="the PNG to write")
    parser.add_argument(
        "--tabs-dir", help="also save every tab at a desktop and a phone width into this folder"
    )
    parser.add_argument("--database", help="database key, e.g. world/library")
    parser.add_argument("--question", help="the question (default: a disagreement, else the first example)")
    parser.add_argument("--width", type=int, default=WIDTHS["desktop"], help="viewport width in pixels")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    sys.path.insert(0, str(REPO / "spaces" / "demo"))
    import app
    from playwright.sync_api import sync_playwright
    from space_backend import ComparisonSpace, SpaceSettings

    space = ComparisonSpace(SpaceSettings(run_dir=args.run_dir))
    if not space.preload():
        logger.error("the Space cannot answer on %s: %s", args.run_dir, "; ".join(space.data.problems))
        space.close()
        return 2
    key, question = (
        (args.database, args.question) if args.question else _default_question(space, args.database)
    )
    if key is None or key not in space.data.databases or not question:
        logger.error(
            "no database %r with a question to ask in %s: pass --database and --question", key, args.run_dir
        )
        space.close()
        return 2
    example = space.find_example(key, question) is not None
    demo = app.build_demo(space)
    port = _free_port()
    try:
        app.launch(demo, space.settings, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            widths = {"readme": args.width, **(WIDTHS if args.tabs_dir else {})}
            for suffix, width in widths.items():
                page = browser.new_page(viewport={"width": width, "height": 1100})
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_selector("#compare-button", timeout=60_000)
                ask(page, space.data.databases[key].label, question, example)
                if suffix == "readme":
                    out = Path(args.out)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(out), full_page=True)
                    logger.info("wrote %s (%s: %r)", out, key, question)
                else:
                    saved = save_tabs(page, Path(args.tabs_dir), suffix)
                    logger.info("wrote %d tab screenshots at %d px into %s", len(saved), width, args.tabs_dir)
                page.close()
            browser.close()
    finally:
        demo.close()
        space.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
