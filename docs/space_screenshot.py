"""Take the screenshot of the comparison Space (``docs/space.png``, shown in ``docs/space.md``) on a run folder.

It serves ``spaces/demo/app.py`` on a free local port, opens it in Debian's chromium through Playwright
(headless, no browser download), picks a database and one of its example questions, clicks Compare, waits
for both answers, and saves a full-page screenshot::

    python docs/space_screenshot.py --run-dir outputs/quickstart --out docs/space.png
    python docs/space_screenshot.py --run-dir outputs/quickstart --database world/library --question "How many ..."

Without ``--question`` the database's first example question is used (with ``--database``, else the first
database that has examples).
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

logger = logging.getLogger("space_screenshot")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run-dir", default="outputs/quickstart", help="the run folder (default outputs/quickstart)"
    )
    parser.add_argument("--out", default=str(REPO / "docs" / "space.png"), help="the PNG to write")
    parser.add_argument("--database", help="database key, e.g. world/library")
    parser.add_argument("--question", help="the question (default: the database's first example)")
    parser.add_argument("--width", type=int, default=1400, help="viewport width in pixels")
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
    key = args.database or next((k for k in space.data.databases if space.examples(k)), None)
    if key is None or key not in space.data.databases:
        logger.error("no database %r with example questions in %s", key, args.run_dir)
        space.close()
        return 2
    question = args.question or (space.examples(key)[0].question if space.examples(key) else None)
    if not question:
        logger.error("database %s has no example question: pass --question", key)
        space.close()
        return 2
    demo = app.build_demo(space)
    port = _free_port()
    try:
        app.launch(demo, space.settings, "127.0.0.1", port, prevent_thread_lock=True, quiet=True)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": 1100})
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_selector("#compare-button", timeout=60_000)
            page.locator("#database input").click()
            page.get_by_role("option").filter(has_text=space.data.databases[key].label).first.click()
            page.wait_for_timeout(1000)
            example = next((e for e in space.examples(key) if e.question == question), None)
            if example is not None:
                page.locator("#example input").click()
                page.get_by_role("option").filter(has_text=question).first.click()
            else:
                page.locator("#question textarea").fill(question)
            page.wait_for_function(
                "q => document.querySelector('#question textarea').value === q", arg=question, timeout=30_000
            )
            page.locator("#compare-button").click()
            for column in ("sft", "grpo"):
                page.locator(f"#{column}-status").get_by_text("tokens").wait_for(timeout=600_000)
            page.wait_for_timeout(1000)
            out = Path(args.out)
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
            browser.close()
        logger.info("wrote %s (%s: %r)", out, key, question)
    finally:
        demo.close()
        space.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
