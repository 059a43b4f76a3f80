"""A ``slmsql diagnose`` report for the card, Space and push tests, written by the diagnosis's own writer
(:func:`slmsql_hub.diagnosis.run.build_report` and ``write_outputs``) from hand-made question records in the shape
``diagnosis/sample.py`` writes (no model, no sampling). :data:`EXPECTED` holds, per slice, the numbers the records
give, counted here by hand: greedy EX, pass@4 (the share with a correct sample), maj@4 and the all-fail share."""

from __future__ import annotations

from pathlib import Path

from slmsql_hub.diagnosis import DiagnoseConfig
from slmsql_hub.diagnosis.run import build_report, write_outputs

OPERATOR = ("wrong_operator", ">=", ">")
LITERAL = ("wrong_literal", "'Paris'", "'paris'")


def _record(qid: str, greedy: int | None, c: int, maj: int | None, wrong: list[tuple], n: int = 4) -> dict:
    """A question with ``n`` scorable samples, ``c`` of them right; ``wrong``: the wrong samples' classes."""
    assert len(wrong) == n - c
    shape = [{"kind": k, "trigger": t, "output": o, "detail": None} for k, t, o in wrong]
    samples = [{"sql": "SELECT 1", "verdict": "wrong", "anatomy": a} for a in shape]
    samples += [{"sql": "SELECT 1", "verdict": "correct", "anatomy": None}] * c
    greedy_anatomy = shape[0] if greedy == 0 and shape else None
    return {"question_id": qid, "db_id": "db", "family": "filter", "key": None, "scorable": True, "greedy": greedy,
            "greedy_anatomy": greedy_anatomy, "n": n, "c": c, "maj": maj, "pass_rate": c / n,
            "samples": samples}  # fmt: skip


RECORDS = {
    "world_dev": [
        _record("d1", 0, 2, 1, [OPERATOR] * 2),
        _record("d2", 1, 4, 1, []),
        _record("d3", 0, 0, 0, [LITERAL] * 4),
        _record("d4", 1, 3, 1, [OPERATOR]),
    ],
    "world_test": [_record("t1", 0, 1, 0, [OPERATOR] * 3), _record("t2", 0, 0, 0, [LITERAL] * 4)],
}
TRAINING = [_record("b1", None, 2, None, [OPERATOR] * 2), _record("b2", None, 1, None, [OPERATOR] * 3)]
EXPECTED = {  # slice: (n, greedy EX, pass@4, maj@4, all-fail), in %
    "world_dev": (4, "50.0%", "75.0%", "75.0%", "25.0%"),
    "world_test": (2, "0.0%", "50.0%", "0.0%", "50.0%"),
}


def write_diagnosis(folder: Path, training: bool = True) -> dict:
    """Write ``report.json``, ``report.md``, ``diagnosis.png`` and ``questions/`` into ``folder``; return the
    report. With ``training`` the operator error is in the training band with reward variance, so it is
    predicted fixable; without, nothing qualifies."""
    config = DiagnoseConfig(model_name_or_path="outputs/quickstart/base", adapter_path="outputs/quickstart/sft/stage2",
                            benchmarks=["world:dev", "world:test"], world_root="outputs/quickstart/world",
                            training_band="outputs/quickstart/filter/band" if training else None,
                            num_samples=4, output_dir=str(folder))  # fmt: skip
    band = TRAINING if training else None
    report = build_report(config, {name: {"mode": "bird"} for name in RECORDS}, RECORDS, band)
    write_outputs(folder, report, RECORDS, band)
    return report
