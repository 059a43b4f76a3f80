"""Every number the README's finding, the card's ablation section and the Space's Ablations tab state appears in
a committed report (``report.json`` under docs/ablations/, its transfer and held-out studies and their worlds; the
diagnoses and the validation table under docs/diagnosis/): prose cannot cite a number that no report holds. The finding's text in the README sits between ``<!-- finding -->`` and
``<!-- /finding -->`` markers."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REPORTS = sorted((REPO / "docs" / "ablations").rglob("report.json")) + sorted((REPO / "docs" / "diagnosis").rglob("*.json"))
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w])")
# Words that name things, not results: issue numbers, pass@k's k, SQL and version strings.
IGNORED = re.compile(r"#\d+|pass@\d+|maj@\d+|@\d+|\bp\d+\b|plant\d+|_n\d+|n\d+|lr\d|e-\d+\b(?= \()|Qwen[\w.-]+|\d+(?=-shot)|\d+B\b")


def _values(node, out: set[float]) -> set[float]:
    if isinstance(node, bool):
        return out
    if isinstance(node, (int, float)) and math.isfinite(node):
        out.add(float(node))
    elif isinstance(node, str):  # a summary line the report stores as text ("208 band / 225 all-fail / ...")
        out.update(float(n) for n in numbers(node) if re.fullmatch(r"\d+(\.\d+)?", n))
    elif isinstance(node, dict):
        for value in node.values():
            _values(value, out)
    elif isinstance(node, list):
        for value in node:
            _values(value, out)
    return out


def renderings(values: set[float]) -> set[str]:
    """Every way a report's number is printed: as is, rounded, in percent or points, as a p-value."""
    shown: set[str] = set()
    for v in values:
        for x in (v, 100 * v, abs(v), 100 * abs(v)):
            shown.update({f"{x:.0f}", f"{x:.1f}", f"{x:.2f}", f"{x:.3f}", f"{x:.4f}", f"{x:.2g}", f"{x:.3g}",
                          f"{x:.1e}", f"{x:.0e}", f"{x:g}"})  # fmt: skip
    return {_exponent(x) for x in shown}


def _exponent(number: str) -> str:
    """``1e-06`` and ``1e+03`` as ``1e-6`` and ``1e3``: Python's and the prose's spellings of one number."""
    return re.sub(r"e([-+])?0*(\d)", lambda m: "e" + (m.group(1) or "").replace("+", "") + m.group(2), number)


def numbers(text: str) -> list[str]:
    """The numbers of ``text`` as printed, sign and thousands separators dropped."""
    text = IGNORED.sub(" ", text)
    return [_exponent(m.group(0).lstrip("+-−").replace(",", "")) for m in NUMBER.finditer(text)]


def _unexplained(text: str, shown: set[str]) -> list[str]:
    return [n for n in numbers(text) if n not in shown and n.rstrip("0").rstrip(".") not in shown]


@pytest.fixture(scope="module")
def shown() -> set[str]:
    if not REPORTS:
        pytest.skip("no committed report under docs/ablations")
    values: set[float] = set()
    for path in REPORTS:
        _values(json.loads(path.read_text(encoding="utf-8")), values)
    return renderings(values)


def test_the_number_check_catches_a_number_no_report_holds():
    shown = renderings({0.243, 2.1e-22, 16.0})
    assert _unexplained("rose +24.3 points (p < 2e-22), pass@16 of 16 samples", shown) == []
    assert _unexplained("rose +24.3 points [+19.7, +29.3]", shown) == ["19.7", "29.3"]
    assert _unexplained("at a rate of 1e-06", renderings({1e-6})) == []  # Python's exponent, the report's number


def test_every_number_of_the_readme_finding_is_in_a_committed_report(shown):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"<!-- finding -->(.*?)<!-- /finding -->", readme, flags=re.S)
    assert blocks, "README.md marks its finding with <!-- finding --> ... <!-- /finding -->"
    assert _unexplained("\n".join(blocks), shown) == []


def test_every_number_of_the_card_section_and_the_space_tab_is_in_a_committed_report(shown):
    """The card's section and the Space's tab are rendered from the reports: the card section whole; of the tab,
    the ablation report's finding (its tables are the report's own numbers) and the transfer finding."""
    from slmsql_hub.card.ablations import card_section
    from slmsql_hub.study.transfer import render_finding

    folder = REPO / "docs" / "ablations"
    assert _unexplained(card_section(folder), shown) == []
    transfer = json.loads((folder / "transfer" / "report.json").read_text(encoding="utf-8"))
    assert _unexplained(render_finding(transfer), shown) == []
    finding = (folder / "report.md").read_text(encoding="utf-8").split("## Finding")[1].split("\n## ")[0]
    assert _unexplained(finding, shown) == []
