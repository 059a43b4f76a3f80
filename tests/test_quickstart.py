"""The quickstart's orchestration (slmsql_hub.quickstart). The full run is `make quickstart` itself: a smoke-sized
end-to-end test needs a smoke SFT policy whose band is non-empty, which the smoke recipes do not guarantee yet."""

from __future__ import annotations

from pathlib import Path

import pytest

from slmsql_hub.errors import UsageError
from slmsql_hub.quickstart import STAGES, QuickstartResult, _skip_attempt1, run_quickstart

REPO = Path(__file__).resolve().parents[1]


def test_every_stage_runs_a_registered_subcommand_with_a_world_recipe():
    from slmsql_hub.cli import build_parser

    parser = build_parser()
    out, recipes = Path("/tmp/run dir/with space"), REPO / "recipes" / "world"
    for stage in STAGES:
        argv = stage.argv(out, recipes, "me/model")
        assert parser.parse_known_args(argv)[0].command == argv[0]
        assert any(a.startswith(str(out)) for a in argv), stage.name  # a path with a space stays one argument
        configs = [argv[i + 1] for i, a in enumerate(argv) if a == "--config"]
        for config in configs:
            assert Path(config).parent == recipes and Path(config).is_file(), config


def test_finished_stages_are_reused_and_nothing_runs(tmp_path):
    for stage in STAGES:
        marker = tmp_path / stage.marker
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")
    seen = []
    result = run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", on_stage=lambda *a: seen.append(a[-1]))
    assert result.reused == [s.name for s in STAGES] and not result.ran
    assert seen == ["reused"] * len(STAGES)


def test_a_failing_stage_is_one_clear_error_naming_it(tmp_path, capsys):
    # No recipes folder with base.yaml: the world stage works but `train base` cannot read its recipe.
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (tmp_path / "run" / "world").mkdir(parents=True)
    (tmp_path / "run" / "world" / "world.json").write_text("{}")
    with pytest.raises(UsageError, match="stage 'base' failed"):
        run_quickstart(tmp_path / "run", recipes=recipes)


def test_attempt1_runs_only_when_it_fits_the_budget():
    fresh = QuickstartResult(out=Path("."), ran={"grpo": 100.0})
    assert _skip_attempt1("auto", fresh, elapsed=300, budget_s=600) is None
    assert "budget" in _skip_attempt1("auto", fresh, elapsed=450, budget_s=600)
    assert _skip_attempt1("always", fresh, elapsed=10_000, budget_s=600) is None
    assert _skip_attempt1("never", fresh, elapsed=0, budget_s=600) == "attempt1=never"
    assert "no timing" in _skip_attempt1("auto", QuickstartResult(out=Path(".")), elapsed=0, budget_s=600)
