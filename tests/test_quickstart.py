"""The quickstart's orchestration (slmsql_hub.commands.quickstart), and two slow end-to-end runs: the default recipes
(the main job itself, ~7 minutes on 2 cores) and the smoke recipes, whose barely trained policy leaves the band
empty, which must stop the run at GRPO with one line naming the fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slmsql_hub.cli import main
from slmsql_hub.commands.quickstart import QuickstartResult, _skip_attempt1, run_quickstart
from slmsql_hub.commands.study import COMMANDS, flat_options, load_study
from slmsql_hub.errors import UsageError
from slmsql_hub.run.layout import RunLayout

REPO = Path(__file__).resolve().parents[1]
QWEN = REPO / "recipes" / "qwen2.5-coder-1.5b"
WORLD = load_study(REPO / "recipes" / "world")
STAGES = WORLD.stages


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
        marker = stage.marker(RunLayout(tmp_path))
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")
    seen = []
    result = run_quickstart(
        tmp_path, recipes=REPO / "recipes" / "world", on_stage=lambda *a: seen.append(a[-1])
    )
    assert result.reused == [s.name for s in STAGES] and not result.ran
    assert seen == ["reused"] * len(STAGES)


def test_stages_call_the_library_in_order_with_their_command_lines_options_not_the_cli(tmp_path, monkeypatch):
    import slmsql_hub.cli
    import slmsql_hub.commands.quickstart as quickstart

    monkeypatch.setattr(slmsql_hub.cli, "main", lambda *a: pytest.fail("the quickstart called the CLI"))
    recipes, calls = REPO / "recipes" / "world", []

    def fake(command):
        def call(run, values, recipe):
            stage = next(s for s in STAGES if s.command == command and s.name not in [c[0] for c in calls])
            calls.append((stage.name, recipe, dict(values)))
            stage.marker(run).parent.mkdir(parents=True, exist_ok=True)
            stage.marker(run).write_text("{}")
            return {}

        return call

    monkeypatch.setattr(quickstart, "_CALLS", {command: fake(command) for command in quickstart._CALLS})
    monkeypatch.setattr(quickstart, "_cores", lambda: 1)  # attempt #1 in this process, after the band run
    result = run_quickstart(tmp_path, recipes=recipes, attempt1="always")
    assert [name for name, _, _ in calls] == [s.name for s in STAGES] == list(result.ran)
    for (name, recipe, values), stage in zip(calls, STAGES):
        argv = stage.argv(tmp_path, recipes, WORLD.repo_id)
        flat = flat_options({f"--{key}": value for key, value in values.items()})
        # the field values of the command line's options, hyphens or underscores as the study spells them
        assert [a.replace("-", "_") for a in argv[len(argv) - len(flat) :]] == [a.replace("-", "_") for a in flat]
        assert all(not key.startswith("-") for key in values), name  # typed fields, not --flags
        assert recipe == (recipes / stage.recipe if stage.recipe else None)


def test_a_failing_stage_is_one_clear_error_naming_it_and_its_cause(tmp_path):
    # No recipes folder with base.yaml: the world stage is reused but `train base` cannot read its recipe.
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (tmp_path / "run" / "world").mkdir(parents=True)
    (tmp_path / "run" / "world" / "world.json").write_text("{}")
    with pytest.raises(
        UsageError, match=r"stage 'base' failed: .*base\.yaml.*; fix the cause and rerun"
    ) as err:
        run_quickstart(tmp_path / "run", recipes=recipes)
    assert "\n" not in str(err.value)


def test_attempt1_runs_only_when_it_fits_the_budget():
    fresh = QuickstartResult(out=Path("."), ran={"grpo": 100.0})
    assert _skip_attempt1("auto", fresh, elapsed=300, budget_s=600) is None
    assert "budget" in _skip_attempt1("auto", fresh, elapsed=450, budget_s=600)
    assert _skip_attempt1("always", fresh, elapsed=10_000, budget_s=600) is None
    assert _skip_attempt1("never", fresh, elapsed=0, budget_s=600) == "attempt1=never"
    assert "no timing" in _skip_attempt1("auto", QuickstartResult(out=Path(".")), elapsed=0, budget_s=600)


@pytest.mark.slow
def test_quickstart_end_to_end_with_the_default_recipes(tmp_path, capsys):
    """The main job for real: every stage, the mechanism visible in the telemetry, then a rerun reusing all."""
    out = tmp_path / "run"
    assert main(["quickstart", "--out", str(out), "--attempt1", "always"]) == 0
    printed = capsys.readouterr().out
    assert "quickstart finished" in printed and "spaces/demo/app.py" in printed
    for stage in STAGES:
        assert stage.marker(RunLayout(out)).is_file(), stage.name

    report = json.loads((out / "filter" / "filter_report.json").read_text())
    assert report["counts"]["band"] > 0 and sum(report["counts"].values()) == report["pool"]
    assert (report["excluded_sft"], report["sft_overlap"]) == (
        0,
        0,
    )  # rl_pool is held out from both SFT stages
    band, attempt1 = (
        json.loads((out / r / "run_summary.json").read_text()) for r in ("grpo", "grpo_attempt1")
    )
    for summary in (band, attempt1):
        assert summary["adapter_checksum"]["changed"] and summary["guards"]["failed"] == []
        update = summary["adapter_update"]  # how far each attempt moved its adapter, above the recipe's floor
        assert update["relative_norm"] > update["min_relative_update"] > 0
        assert "adapter_update" not in summary["guards"]["warned"]
    # The study's mechanism: mastered data gives mostly zero-variance groups, the band far fewer.
    zero_std = [s["telemetry"]["mean"]["frac_reward_zero_std_exact"] for s in (attempt1, band)]
    assert zero_std[0] > zero_std[1] + 0.2, zero_std

    results = json.loads((out / "eval" / "eval_results.json").read_text())["benchmarks"]
    assert set(results) == {"world_dev", "world_test"}
    assert results["world_dev"]["policies"]["sft"]["ex"] > 0.25  # the SFT policy has learnt the world
    card = (out / "card" / "README.md").read_text()
    assert card.startswith("---") and "world_dev" in card

    assert main(["quickstart", "--out", str(out)]) == 0
    assert capsys.readouterr().out.count(": reused") == len(STAGES)


@pytest.mark.slow
def test_smoke_quickstart_with_an_empty_band_stops_at_grpo_naming_the_fix(tmp_path):
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    for smoke in (REPO / "recipes" / "world").glob("*_smoke.yaml"):
        shutil.copy(smoke, recipes / smoke.name.replace("_smoke", ""))
    out = tmp_path / "run"
    with pytest.raises(UsageError, match="stage 'grpo' failed: .*widen pass_rate_low/pass_rate_high"):
        run_quickstart(out, recipes=recipes)
    report = json.loads((out / "filter" / "filter_report.json").read_text())
    # The filter read the stage-2 adapter's record of both SFT stages' questions; none is in rl_pool.
    assert (report["excluded_sft"], report["sft_overlap"]) == (0, 0)
    assert report["sft_record"]["complete"] and report["sft_record"]["questions"] > 0
    if report["counts"]["band"]:
        pytest.fail(
            f"the smoke band is not empty any more ({report['summary']}): test the full chain here instead"
        )


def _fake_calls(monkeypatch, calls: list) -> None:
    """Every stage's library call replaced by one that records its field values and writes the stage's marker."""
    import slmsql_hub.commands.quickstart as quickstart

    def fake(command):
        def call(run, values, recipe):
            calls.append((command, recipe.name if recipe else None, dict(values)))
            marker = {"world build": run.world_manifest, "filter": run.filter_report, "eval": run.eval_results,
                      "card": run.card.readme, "push {out}": run.push_plan}.get(command)  # fmt: skip
            if marker is None:  # a training stage: its output_dir's summary
                marker = Path(str(values["output_dir"])) / "run_summary.json"
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("{}")
            return {}

        return call

    monkeypatch.setattr(quickstart, "_CALLS", {command: fake(command) for command in COMMANDS})
    monkeypatch.setattr(quickstart, "check_hub_sources", lambda study, stages: None)  # tests/test_hub_pins.py


def test_every_command_a_study_may_name_has_a_library_call():
    import slmsql_hub.commands.quickstart as quickstart

    assert set(quickstart._CALLS) == set(COMMANDS)
    assert load_study(REPO / "recipes" / "world").out == quickstart.DEFAULT_OUT


def test_the_qwen_study_takes_its_base_and_sft_adapter_from_the_hub_by_id_and_revision(tmp_path, monkeypatch):
    calls: list = []
    _fake_calls(monkeypatch, calls)
    study = load_study(QWEN)
    result = run_quickstart(tmp_path / "run", recipes=QWEN, attempt1="never")
    run = RunLayout(tmp_path / "run")
    base, sft = study.stage("base").hub, study.stage("sft2").hub
    assert json.loads(run.base.hub.read_text()) == {"repo_id": base.repo_id, "revision": base.revision}
    assert json.loads(run.sft_stage2.hub.read_text()) == {"repo_id": sft.repo_id, "revision": None}
    assert result.skipped.keys() == {"sft1", "grpo_attempt1"} and not run.sft_stage1.path.exists()
    assert list(result.ran) == ["base", "sft2", "filter", "grpo", "eval", "card", "push_dry_run"]
    by_recipe = {recipe: options for _, recipe, options in calls}
    grpo = by_recipe["grpo_band.yaml"]
    assert (grpo["model_name_or_path"], grpo["model_revision"]) == (base.repo_id, base.revision)
    assert grpo["adapter_path"] == sft.repo_id and "adapter_revision" not in grpo  # unpinned: left out
    assert (grpo["dataset_paths"], grpo["output_dir"]) == (str(run.band), str(run.grpo.path))
    assert by_recipe["eval_bird_spider.yaml"]["sft_adapter"] == sft.repo_id
    assert by_recipe["eval_bird_spider.yaml"]["grpo_adapter"] == str(run.grpo.path)

    # Rerun: everything reused; asking to train the SFT adapter now is one line naming the folder.
    assert run_quickstart(tmp_path / "run", recipes=QWEN, attempt1="never").ran == {}
    with pytest.raises(
        UsageError, match=r"sft/stage2/hub.json records stage 'sft2' from the Hub .* --from-hub sft2"
    ):
        run_quickstart(tmp_path / "run", recipes=QWEN, attempt1="never", from_hub="none")


def test_with_from_hub_none_the_qwen_study_trains_both_sft_stages_on_the_hub_base(tmp_path, monkeypatch):
    calls: list = []
    _fake_calls(monkeypatch, calls)
    result = run_quickstart(tmp_path / "run", recipes=QWEN, attempt1="never", from_hub="none")
    run = RunLayout(tmp_path / "run")
    assert list(result.ran)[:3] == ["base", "sft1", "sft2"] and not run.sft_stage2.hub.exists()
    sft2 = next(options for _, recipe, options in calls if recipe == "sft_stage2_bird_spider.yaml")
    assert sft2["adapter_path"] == str(run.sft_stage1.path)
    assert sft2["model_name_or_path"] == load_study(QWEN).stage("base").hub.repo_id
    grpo = next(options for _, recipe, options in calls if recipe == "grpo_band.yaml")
    assert grpo["adapter_path"] == str(run.sft_stage2.path) and "adapter_revision" not in grpo


def test_a_stage_the_study_cannot_take_from_the_hub_is_one_line_before_anything_runs(tmp_path):
    with pytest.raises(
        UsageError, match=r"--from-hub filter: the study qwen2.5-coder-1.5b takes only base, sft2"
    ):
        run_quickstart(tmp_path / "run", recipes=QWEN, from_hub="filter")
    assert not (tmp_path / "run").exists()
    assert (
        main(["quickstart", "--recipes", str(QWEN), "--out", str(tmp_path / "run"), "--from-hub", "grpo"])
        == 2
    )


@pytest.mark.parametrize(
    ("stage", "said"),
    [
        ("    command: train sft\n    folder: nope\n", "folder must be one of base, sft_stage1"),
        ("    command: filter\n    marker: nowhere\n", "a marker or option names no place of the run"),
        (
            "    command: filter\n    marker: filter_report\n    options: {--x: '{nowhere}'}\n",
            "names no place",
        ),
        ("    command: fly\n    marker: filter_report\n", "unknown command 'fly'"),
        ("    folder: base\n", "needs a command or a hub source"),
        ("    command: filter\n    marker: filter_report\n    optional: true\n    beside: world\n",
         "beside must name the stage right before it"),  # fmt: skip
    ],
)
def test_a_malformed_study_table_is_one_line_and_exit_2_before_anything_runs(tmp_path, capsys, stage, said):
    (tmp_path / "study.yaml").write_text(f"name: x\nrepo_id: me/model\nstages:\n  - name: s\n{stage}")
    assert main(["quickstart", "--recipes", str(tmp_path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and not (tmp_path / "run").exists()


def test_until_runs_the_stages_up_to_the_named_one_and_skips_the_rest_saying_why(tmp_path, monkeypatch):
    import slmsql_hub.commands.quickstart as quickstart

    def fake(run, options, recipe):
        stage = next(s for s in STAGES if not s.marker(run).is_file())
        stage.marker(run).parent.mkdir(parents=True, exist_ok=True)
        stage.marker(run).write_text("{}")
        return {}

    monkeypatch.setattr(quickstart, "_CALLS", {command: fake for command in quickstart._CALLS})
    monkeypatch.setattr(quickstart, "_cores", lambda: 1)  # attempt #1 in this process, after the band run
    names = [s.name for s in STAGES]
    result = run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", until="sft2", attempt1="always")
    assert list(result.ran) == names[: names.index("sft2") + 1]
    assert set(result.skipped) == set(names[names.index("sft2") + 1 :])
    assert all(why == "after --until sft2" for why in result.skipped.values())
    # rerunning without --until finishes the study from where it stopped
    again = run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", attempt1="always")
    assert again.reused == list(result.ran) and list(again.ran) == list(result.skipped)


def test_an_unknown_until_stage_is_one_line_and_exit_2_before_anything_runs(tmp_path, capsys):
    assert main(["quickstart", "--out", str(tmp_path / "run"), "--until", "sft3"]) == 2
    err = capsys.readouterr().err
    assert "sft3" in err and "sft2" in err and err.count("\n") == 1 and not (tmp_path / "run").exists()


def test_the_closing_summary_names_the_given_repo_id(tmp_path, monkeypatch, capsys):
    _fake_calls(monkeypatch, [])
    args = ["quickstart", "--recipes", str(QWEN), "--out", str(tmp_path / "run"), "--attempt1", "never"]
    assert main([*args, "--repo-id", "bob/my-sql-grpo"]) == 0
    assert "--repo-id bob/my-sql-grpo --what all" in capsys.readouterr().out  # today: NAMESPACE/NAME


def test_set_overrides_every_stage_whose_configuration_has_the_field_and_is_recorded(tmp_path, monkeypatch):
    calls: list = []
    _fake_calls(monkeypatch, calls)
    sets = {"max_steps": "2", "model_name_or_path": "alice/tiny-qwen"}
    run_quickstart(tmp_path / "run", recipes=QWEN, attempt1="never", sets=sets)
    by_recipe = {recipe: options for _, recipe, options in calls}
    assert by_recipe["grpo_band.yaml"]["max_steps"] == "2"  # the study's own options lose to --set
    assert {r for r, o in by_recipe.items() if o.get("model_name_or_path") == "alice/tiny-qwen"} == {
        "filter_synsql.yaml", "grpo_band.yaml", "eval_bird_spider.yaml"
    }  # fmt: skip
    assert "max_steps" not in by_recipe["eval_bird_spider.yaml"]  # no such field: left alone
    recorded = json.loads((tmp_path / "run" / "quickstart_overrides.json").read_text())
    assert recorded == {"set": sets}
    with pytest.raises(UsageError, match=r"was run with --set .*max_steps.* give the same overrides"):
        run_quickstart(tmp_path / "run", recipes=QWEN, attempt1="never", sets={"max_steps": "3"})


def test_a_set_field_no_stage_has_is_one_line_and_exit_2_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["quickstart", "--recipes", str(QWEN), "--out", str(out), "--set", "max_stepz=2"]) == 2
    err = capsys.readouterr().err
    assert "--set max_stepz: no stage of" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert main(["quickstart", "--set", "max_steps"]) == 2
    assert "argument --set: expected FIELD=VALUE" in capsys.readouterr().err


def test_a_world_of_another_version_is_not_reused_silently(tmp_path):
    """A run folder whose world an older version of the world code built: quickstart refuses to reuse it (its
    questions differ and the later stages trained on it), naming both versions and --force."""
    from slmsql_hub.world.build import WORLD_VERSION

    for stage in STAGES:
        marker = stage.marker(RunLayout(tmp_path))
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")
    world = RunLayout(tmp_path).world / "world.json"
    world.write_text(json.dumps({"version": "1", "seed": 0}))
    assert WORLD_VERSION != "1"
    with pytest.raises(UsageError, match=rf"world of version 1, this code builds version {WORLD_VERSION}.*--force"):
        run_quickstart(tmp_path, recipes=REPO / "recipes" / "world")
    world.write_text(json.dumps({"version": WORLD_VERSION, "seed": 0}))
    assert "world" in run_quickstart(tmp_path, recipes=REPO / "recipes" / "world").reused


def _only_grpo_left(run: Path, first: str = "grpo") -> None:
    for stage in STAGES[: [s.name for s in STAGES].index(first)]:
        marker = stage.marker(RunLayout(run))
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")


def _light_beside_processes(monkeypatch) -> list:
    """Beside processes that import nothing ahead (a timed stub needs no torch); each one made, with when."""
    import time

    import slmsql_hub.commands.quickstart as quickstart
    from slmsql_hub.commands._beside import BesideProcess

    made = []

    def light(stage):
        made.append((time.time(), BesideProcess(stage)))
        return made[-1][1]

    monkeypatch.setattr(quickstart, "_beside_process", light)
    return made


def test_attempt1_runs_beside_the_band_run_in_its_own_process_at_the_same_time(tmp_path, monkeypatch):
    import os

    import slmsql_hub.commands.quickstart as quickstart
    from tests._helpers import timed_stage

    monkeypatch.setattr(quickstart, "_cores", lambda: 2)
    monkeypatch.setitem(quickstart._CALLS, "train grpo", timed_stage)
    _light_beside_processes(monkeypatch)
    _only_grpo_left(tmp_path)
    seen = []
    result = run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", until="grpo_attempt1",
                            on_stage=lambda i, n, stage, state: seen.append((stage.name, state)))  # fmt: skip
    band, attempt1 = (json.loads(RunLayout(tmp_path).__getattribute__(name).summary.read_text())
                      for name in ("grpo", "grpo_attempt1"))  # fmt: skip
    assert band["pid"] == os.getpid() != attempt1["pid"]
    assert attempt1["start"] < band["end"] and band["start"] < attempt1["end"]  # at the same time
    assert set(result.ran) == {"grpo", "grpo_attempt1"} and "grpo_attempt1" not in result.skipped
    assert [entry for entry in seen if entry[0].startswith("grpo")] == [
        ("grpo", "start"), ("grpo_attempt1", "start"), ("grpo_attempt1", "done"), ("grpo", "done")]  # fmt: skip
    # On one core it runs after the band run, when the budget allows (here always).
    monkeypatch.setattr(quickstart, "_cores", lambda: 1)
    shutil.rmtree(RunLayout(tmp_path).grpo_attempt1.path)
    shutil.rmtree(RunLayout(tmp_path).grpo.path)
    result = run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", until="grpo_attempt1", attempt1="always")
    band, attempt1 = (json.loads(RunLayout(tmp_path).__getattribute__(name).summary.read_text())
                      for name in ("grpo", "grpo_attempt1"))  # fmt: skip
    assert band["pid"] == attempt1["pid"] and band["end"] <= attempt1["start"]


def test_the_beside_process_starts_with_a_one_core_stage_and_runs_its_stage_later(tmp_path, monkeypatch):
    # Its imports then use the core the one-core stage leaves idle; the same process runs attempt #1 later.
    import slmsql_hub.commands.quickstart as quickstart
    from tests._helpers import timed_stage

    monkeypatch.setattr(quickstart, "_cores", lambda: 2)
    monkeypatch.setitem(quickstart._CALLS, "train grpo", timed_stage)
    monkeypatch.setitem(quickstart._CALLS, "filter", _timed_filter)
    monkeypatch.setitem(quickstart._CALLS, "world build", _timed_world)
    monkeypatch.setattr(quickstart, "_ONE_CORE", frozenset({"world build", "filter"}))  # two before the pair
    made = _light_beside_processes(monkeypatch)
    for stage in STAGES[1 : [s.name for s in STAGES].index("filter")]:  # base to SFT 2 done; world and filter left
        marker = stage.marker(RunLayout(tmp_path))
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")
    run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", until="grpo_attempt1")
    layout = RunLayout(tmp_path)
    filtered = json.loads(layout.filter_report.read_text())
    attempt1 = json.loads(layout.grpo_attempt1.summary.read_text())
    band = json.loads(layout.grpo.summary.read_text())
    assert len(made) == 1 and made[0][0] <= filtered["start"] < filtered["end"] <= band["start"]  # made once, early
    assert made[0][1].process.pid == attempt1["pid"] and not made[0][1].process.is_alive()


def test_a_beside_process_started_early_ends_when_an_earlier_stage_fails(tmp_path, monkeypatch):
    import slmsql_hub.commands.quickstart as quickstart

    monkeypatch.setattr(quickstart, "_cores", lambda: 2)
    monkeypatch.setitem(quickstart._CALLS, "filter", _failing_filter)
    monkeypatch.setattr(quickstart, "_ONE_CORE", frozenset({"filter"}))
    made = _light_beside_processes(monkeypatch)
    _only_grpo_left(tmp_path, first="filter")
    with pytest.raises(UsageError, match=r"^stage 'filter' failed"):
        run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", until="grpo_attempt1")
    assert len(made) == 1 and not made[0][1].process.is_alive()
    assert not RunLayout(tmp_path).grpo_attempt1.path.exists()


def _failing_filter(run, values, recipe) -> dict:
    raise UsageError(f"no pool under {values['world_root']}")


def _timed_world(run, values, recipe) -> dict:
    """The world build as a stub: its manifest, nothing else."""
    from slmsql_hub.world.build import WORLD_VERSION

    manifest = STAGES[0].marker(run)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"version": WORLD_VERSION, "seed": 0}))
    return {}


def _timed_filter(run, values, recipe) -> dict:
    """The filter stage as a stub: 1 s, then its marker holding its start and end times."""
    import time

    start = time.time()
    time.sleep(1.0)
    report = run.filter_report
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps({"start": start, "end": time.time()}))
    return {}


def test_a_stage_failing_beside_another_is_one_line_naming_it_after_both_stopped(tmp_path, monkeypatch):
    import slmsql_hub.commands.quickstart as quickstart
    from tests._helpers import failing_stage, timed_stage

    monkeypatch.setattr(quickstart, "_cores", lambda: 2)
    _light_beside_processes(monkeypatch)
    monkeypatch.setitem(quickstart._CALLS, "train grpo", failing_stage)  # both fail: the band run names itself
    _only_grpo_left(tmp_path)
    with pytest.raises(UsageError, match=r"^stage 'grpo' failed: no data at .*band") as err:
        run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", until="grpo_attempt1")
    assert "\n" not in str(err.value)
    # the band run trains, attempt #1 fails beside it: the band run is kept, the error names attempt #1
    monkeypatch.setattr(quickstart, "_run_stage", _band_trains(quickstart._run_stage, timed_stage))
    with pytest.raises(UsageError, match=r"^stage 'grpo_attempt1' \(run beside 'grpo'\) failed: .*no data") as err:
        run_quickstart(tmp_path, recipes=REPO / "recipes" / "world", until="grpo_attempt1")
    assert "\n" not in str(err.value) and RunLayout(tmp_path).grpo.summary.is_file()
    assert not RunLayout(tmp_path).grpo_attempt1.summary.exists()


def _band_trains(run_stage, call):
    """``_run_stage`` here with ``call`` (the band run trains); the spawned child imports the module afresh and
    runs the failing ``_CALLS`` entry it is handed."""

    def patched(stage, run, recipes, repo_id, **kwargs):
        return run_stage(stage, run, recipes, repo_id, **{**kwargs, "call": kwargs.get("call") or call})

    return patched
