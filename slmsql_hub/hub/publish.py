"""Publishing a run to the Hugging Face Hub: the model repo, the filtered band, the ``ex`` metric Space, the demo.

``slmsql push RUN_DIR --repo-id NAMESPACE/NAME`` (see :mod:`slmsql_hub.commands.push`) runs two steps:

1. :func:`plan_push` (:mod:`slmsql_hub.hub.plan`) decides *what goes where* from the run folder alone, before
   any network call, and fails with one clear :class:`~slmsql_hub.errors.UsageError` when an input is missing;
2. :func:`push` (this module) stages each target's files as they land in the repository and uploads them with
   one ``HfApi.upload_folder`` commit per repository (the band through ``Dataset.push_to_hub``); or
   :func:`write_dry_run` writes the exact same folders, plus ``plan.json``, and touches no network.

This module re-exports the plan's API and the band's (:mod:`slmsql_hub.hub.band`), so ``slmsql_hub.hub`` is the
one import for publishing.

The targets (``--what``, comma-separated, or ``all``) and their default repository ids, all derived from
``--repo-id NAMESPACE/NAME``:

================  ==========  ===========================  ===================================================
``--what``        repo type   default id                   content
================  ==========  ===========================  ===================================================
``model``         model       ``NAMESPACE/NAME``           ``RUN_DIR/card/`` as ``slmsql card`` assembled it: the
                                                           card (README.md), plots, ``.eval_results/``, the
                                                           adapter and tokenizer, telemetry, run summary, eval
                                                           predictions
(with ``model``)  model       ``NAMESPACE/NAME-base``      a local base model (``RUN_DIR/card/base/``) as its own
                                                           repository, with a short card; pushed first
``sft-model``     model       ``NAMESPACE/NAME-sft``       the SFT stage-2 adapter the GRPO adapter started from
                                                           (``RUN_DIR/sft/stage2``), naming the same base, with
                                                           its training card
``dataset``       dataset     ``NAMESPACE/NAME-band``      the pass-rate band (``RUN_DIR/filter/band``) as
                                                           parquet through ``Dataset.push_to_hub`` (LFS), and a
                                                           dataset card with the counts of ``filter_report.json``
``metric-space``  space       ``NAMESPACE/ex``             the ``ex`` metric: ``ex.py``, its card as the Space's
                                                           README, ``app.py`` (Gradio 6), ``requirements.txt``
``demo-space``    space       ``NAMESPACE/NAME-demo``      ``spaces/demo/``, its ``space_config.json`` naming the
                                                           base, SFT and GRPO repositories (and revision), the
                                                           run's world databases, README ``models:``/``datasets:``
world-benchmark   dataset     ``NAME-world-benchmark``     a world run's evaluation splits as a benchmark: parquet,
                              (in ``NAMESPACE``)           databases, ``eval.yaml``; pushed first, the model card
                                                           names it (:mod:`slmsql_hub.hub.world_benchmark`)
================  ==========  ===========================  ===================================================

Both Spaces carry the slmsql-hub wheel of the running version (``wheels/``) and a ``requirements.txt`` pinning it
by URL (:mod:`slmsql_hub.hub.wheel`). The model card and ``.eval_results`` are rendered again at push time for the
repository pushed to (:func:`slmsql_hub.card.render_for_repo`), so no id, URL or snippet names another one; a local
base is its own repository and not shipped in the adapter's a second time.
================  ==========  ===========================  ===================================================

The adapter that is uploaded names its base as the Hub knows it (``base_model_name_or_path`` in
``adapter_config.json``, ``base_model`` + ``base_model_relation: adapter`` in the card), so
``AutoPeftModelForCausalLM.from_pretrained("NAMESPACE/NAME")`` loads it anywhere; see :mod:`slmsql_hub.hub.base_model`.

Models and datasets are created **private**, Spaces **public** (pip reads a Space's wheel URL without a token only
then), unless ``private`` says otherwise; an existing repository keeps its visibility.
``revision`` pushes to a branch (created from ``main`` when missing); ``create_pr`` opens a pull request
against that branch instead of committing to it. A re-push of unchanged files makes no commit (the client compares
hashes with the Hub's).

Training recipes with ``push_to_hub: true`` push checkpoints as TRL does (``hub_strategy``); TRL's draft card
is kept out of ``README.md`` by the GRPO trainer, and :func:`push_training_card` puts the project's card there
at the end of training.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..card.training import TRAINING_RUN_FILES, training_card
from ..errors import InfrastructureError, UsageError
from ..refs import check_repo_id
from ..run.files import read_json_object
from ..run.layout import CARD_README, RUN_SUMMARY, StageFolder
from .band import BAND_SPLIT, load_band
from .plan import stage_files
from .progress import PushProgress, fingerprint
from .targets import (
    BASE_MODEL,
    DATASET,
    DEMO_DATA,
    DEMO_SPACE,
    IGNORE_PATTERNS,
    METRIC_SPACE,
    MODEL,
    SFT_MODEL,
    STALE_MODEL_FILES,
    WORLD_BENCHMARK,
    PushTarget,
    folder_files,
)

if TYPE_CHECKING:
    from huggingface_hub import HfApi


logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class PushResult:
    """What one push did: the repository URL, the commit and, with ``create_pr``, the pull request.

    Example:

    ```python
    >>> PushResult("model", "model", "alice/x", "https://huggingface.co/alice/x", None, None).pr_url is None
    True

    ```
    """

    what: str
    repo_type: str
    repo_id: str
    url: str
    commit_url: str | None
    commit_oid: str | None
    pr_url: str | None = None
    private: bool | None = None
    resumed: bool = False
    """Pushed by an earlier, interrupted run of the same push (:mod:`slmsql_hub.hub.progress`); not sent again."""


def _one_line(err: Exception, limit: int = 300) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _hub_api(token: str | None) -> tuple[HfApi, str]:
    """An ``HfApi`` with a token that the Hub accepts, and the user name; UsageErrors name the fix."""
    import httpx2  # huggingface_hub 2.x's transport (pyproject's lower bound)
    from huggingface_hub import HfApi, constants, get_token
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    if constants.is_offline_mode():
        raise UsageError(
            "HF_HUB_OFFLINE is set: unset it to push, or use --dry-run to see what would be pushed"
        )
    token = token or get_token()
    if not token:
        raise UsageError(
            "no Hugging Face token: set HF_TOKEN or run `hf auth login` (a token with write access), or use "
            "--dry-run to see what would be pushed"
        )
    api = HfApi(token=token, library_name="slmsql-hub", library_version=__version__)
    try:
        user = api.whoami()["name"]
    except OfflineModeIsEnabled as err:
        raise UsageError("HF_HUB_OFFLINE is set: unset it to push, or use --dry-run") from err
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else None
        if status == 401:
            raise UsageError(
                f"the Hub ({api.endpoint}) rejected the token: set HF_TOKEN to a valid token with write access "
                "or run `hf auth login`"
            ) from err
        raise InfrastructureError(
            f"the Hub at {api.endpoint} failed before anything was pushed ({_one_line(err)}); try again later"
        ) from err
    except httpx2.TransportError as err:
        raise InfrastructureError(
            f"cannot reach the Hub at {api.endpoint} ({_one_line(err)}); nothing was pushed: check the network "
            "and HF_ENDPOINT"
        ) from err
    return api, user


def _forbidden(err: Exception, target: PushTarget) -> UsageError | None:
    from huggingface_hub.errors import HfHubHTTPError

    status = (
        err.response.status_code if isinstance(err, HfHubHTTPError) and err.response is not None else None
    )
    if status in (401, 403):
        return UsageError(
            f"the Hub refused to write {target.repo_type} {target.repo_id} (HTTP {status}): use a token with write "
            f"access to the '{target.repo_id.split('/')[0]}' namespace, or another --repo-id"
        )
    return None


def _ensure_branch(api: HfApi, target: PushTarget, revision: str | None) -> None:
    if revision and revision != "main" and not revision.startswith("refs/pr/"):
        api.create_branch(target.repo_id, branch=revision, repo_type=target.repo_type, exist_ok=True)


def _upload(
    api: HfApi,
    target: PushTarget,
    files: Iterable[tuple[str, Path | bytes]],
    *,
    revision: str | None,
    create_pr: bool,
    message: str,
):
    """One ``upload_folder`` commit of ``files`` (staged as symlinks); TRL's draft card is deleted from a model
    repository (``delete_patterns``). A pull request against a branch other than ``main``, which
    ``upload_folder`` refuses, is the same operations through ``create_commit``."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="slmsql-push-") as folder:
        stage_files(files, Path(folder), link=True, desc=f"staging {target.what}")
        stale = list(STALE_MODEL_FILES) if target.what == MODEL else None
        if create_pr and revision not in (None, "main"):
            return _pull_request_on_branch(api, target, folder, revision, stale, message)
        return api.upload_folder(
            repo_id=target.repo_id,
            folder_path=folder,
            repo_type=target.repo_type,
            revision=revision,
            create_pr=create_pr,
            commit_message=message,
            ignore_patterns=list(IGNORE_PATTERNS),
            delete_patterns=stale,
        )


def _pull_request_on_branch(api: HfApi, target: PushTarget, folder: str, branch: str, stale, message: str):
    """``upload_folder``'s additions and deletions as one ``create_commit`` opening a pull request on ``branch``."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    added = folder_files(folder)
    remote = api.list_repo_files(target.repo_id, repo_type=target.repo_type, revision=branch) if stale else []
    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=local) for path, local in added]
    operations += [CommitOperationDelete(path) for path in remote if path in stale]
    return api.create_commit(
        target.repo_id,
        operations,
        commit_message=message,
        repo_type=target.repo_type,
        revision=branch,
        create_pr=True,
    )


def _push_dataset(api: HfApi, target: PushTarget, *, private: bool, revision: str | None, create_pr: bool):
    """Band as parquet through ``Dataset.push_to_hub``, then our card merged over the one ``datasets`` wrote and
    the databases the rows name (``target.files``), in one commit."""
    from huggingface_hub import CommitOperationAdd, DatasetCard, DatasetCardData, hf_hub_download

    band = load_band(target.dataset_path)
    info = band.push_to_hub(
        target.repo_id,
        split=BAND_SPLIT,
        private=private,
        token=api.token,
        revision=revision,
        create_pr=create_pr,
        commit_message=f"Pass-rate band ({len(band)} questions) from slmsql-hub",
    )
    card_revision = info.pr_revision if create_pr else info.oid
    pushed = DatasetCard.load(
        hf_hub_download(
            target.repo_id, CARD_README, repo_type="dataset", revision=card_revision, token=api.token
        )
    )
    card = DatasetCard(target.card or "")
    # our metadata over what `datasets` wrote (its dataset_info and configs stay)
    ours = {k: v for k, v in card.data.to_dict().items() if k != "configs"}
    card.data = DatasetCardData(**{**pushed.data.to_dict(), **ours})
    operations = [CommitOperationAdd(CARD_README, str(card).encode("utf-8"))]
    operations += [CommitOperationAdd(path, str(local)) for path, local in target.files]
    commit = api.create_commit(
        target.repo_id,
        operations,
        repo_type="dataset",
        revision=info.pr_revision if create_pr else revision,
        parent_commit=None if create_pr else info.oid,
        commit_message=f"Dataset card and the {len(target.files)} database(s) the band's rows name",
    )
    return commit, info


def push(
    targets: Sequence[PushTarget],
    *,
    token: str | None = None,
    private: bool | None = None,
    revision: str | None = None,
    create_pr: bool = False,
    commit_message: str | None = None,
    progress: str | os.PathLike | None = None,
) -> list[PushResult]:
    """Create each target repository of :func:`plan_push` if needed and upload its files; one
    :class:`PushResult` per target (``private``, ``None``: models and datasets private, Spaces public;
    ``revision``, ``create_pr``: module docstring; ``token=None``
    uses ``HF_TOKEN`` or the stored login). ``progress``: the file recording the targets pushed
    (:mod:`slmsql_hub.hub.progress`), so a rerun after a failure skips those whose content is unchanged.
    UsageError: no token, a rejected token, a namespace the token cannot write to, or offline mode;
    InfrastructureError: the Hub failed, naming what was pushed before."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    if not targets:
        return []
    done = PushProgress(progress)  # a garbled file: one line before any network call
    api, user = _hub_api(token)
    logger.info("pushing as %s to %s", user, api.endpoint)
    settings = {"private": private, "revision": revision, "create_pr": create_pr, "commit_message": commit_message}
    results: list[PushResult] = []
    for target in targets:
        key, print_ = f"{target.what} {target.repo_type}/{target.repo_id}", fingerprint(target, **settings)
        recorded = done.pushed(key, print_)
        if recorded is not None:
            logger.info("%s: pushed to %s by the interrupted push before; not pushed again", key, recorded["url"])
            results.append(PushResult(**{**recorded, "resumed": True}))
            continue
        try:
            results.append(_push_one(api, _pinned(api, target, results, create_pr), **settings))
        except HfHubHTTPError as err:
            refused = _forbidden(err, target)
            if refused is not None:
                raise refused from err
            raise InfrastructureError(_failed_midway(api, target, results, err)) from err
        except httpx2.TransportError as err:
            raise InfrastructureError(_failed_midway(api, target, results, err)) from err
        done.record(key, print_, dataclasses.asdict(results[-1]))
    done.finish()
    return results


def _pinned(api: HfApi, target: PushTarget, done: Sequence[PushResult], create_pr: bool) -> PushTarget:
    """``target`` naming what it loads by commit: an adapter the base pushed before it (its commit) and the world
    benchmark its card names, the demo Space every model it loads (:func:`~slmsql_hub.hub.demo.pin_space_config` asks the Hub). A pull request's
    commits are not on the branch yet: nothing is pinned then."""
    from . import base_model as bm
    from .demo import SPACE_CONFIG, pin_space_config

    if create_pr:
        return target
    files = dict(target.files)
    base = next((r for r in done if r.what == BASE_MODEL and r.commit_oid), None)
    if target.what in (MODEL, SFT_MODEL) and base is not None and bm.ADAPTER_CONFIG in files:
        files[bm.ADAPTER_CONFIG] = bm.pin_adapter_config(files[bm.ADAPTER_CONFIG], base.repo_id, base.commit_oid)
        if CARD_README in files:
            files[CARD_README] = bm.pin_card(files[CARD_README], base.repo_id, base.commit_oid)
    if target.what == DEMO_SPACE and SPACE_CONFIG in files:
        files[SPACE_CONFIG] = pin_space_config(files[SPACE_CONFIG], api)
    bench = next((r for r in done if r.what == WORLD_BENCHMARK and r.commit_oid), None)
    if target.what == MODEL and bench is not None:  # the benchmark dataset its evaluation results name
        from .world_benchmark import pin_benchmark

        files = pin_benchmark(files, bench.repo_id, bench.commit_oid)
    return dataclasses.replace(target, files=tuple(sorted(files.items())))


def space_token_note(results: Sequence[PushResult]) -> str | None:
    """What a pushed demo Space needs when a model it loads is private (an ``HF_TOKEN`` secret); ``None`` when
    nothing is.

    Example:

    ```python
    >>> model = PushResult("model", "model", "alice/x", "u", None, None, private=True)
    >>> space = PushResult("demo-space", "space", "alice/x-demo", "u", None, None, private=False)
    >>> print(space_token_note([model, space]))
    the Space alice/x-demo loads the private alice/x: add an HF_TOKEN secret (a read token) in its settings, or make them public
    >>> space_token_note([space]) is None
    True

    ```
    """
    spaces = [r.repo_id for r in results if r.what == DEMO_SPACE]
    hidden = [r.repo_id for r in results if (r.repo_type == "model" or r.what == DEMO_DATA) and r.private]
    if not spaces or not hidden:
        return None
    return (
        f"the Space {', '.join(spaces)} loads the private {', '.join(hidden)}: add an HF_TOKEN secret (a read "
        "token) in its settings, or make them public"
    )


def _failed_midway(api: HfApi, target: PushTarget, done: list[PushResult], err: Exception) -> str:
    """One line: which target failed and why, what was pushed before it, and how to finish."""
    pushed = ", ".join(f"{r.what} ({r.repo_id})" for r in done) if done else "nothing"
    return (
        f"the Hub at {api.endpoint} failed while pushing {target.what} to {target.repo_id} ({_one_line(err)}); "
        f"pushed before it: {pushed}; rerun the same command to push the rest (what was pushed is not sent again)"
    )


def _push_one(
    api: HfApi,
    target: PushTarget,
    *,
    private: bool | None,
    revision: str | None,
    create_pr: bool,
    commit_message: str | None,
) -> PushResult:
    private = target.private(private)
    created = api.create_repo(
        target.repo_id,
        repo_type=target.repo_type,
        private=private,
        exist_ok=True,
        space_sdk=target.space_sdk if target.repo_type == "space" else None,
    )
    url = str(created)
    existing = api.repo_info(target.repo_id, repo_type=target.repo_type)
    if existing.private is not None and existing.private != private:
        logger.warning(
            "%s %s already exists and is %s: its visibility is left as it is",
            target.repo_type,
            target.repo_id,
            "private" if existing.private else "public",
        )
    if target.what == DATASET:
        commit, first = _push_dataset(api, target, private=private, revision=revision, create_pr=create_pr)
        pr_url = first.pr_url
    else:
        _ensure_branch(api, target, revision)
        message = (
            commit_message
            or {
                MODEL: "GRPO adapter, model card, plots and eval results from slmsql-hub",
                SFT_MODEL: "SFT adapter the GRPO adapter started from, from slmsql-hub",
                BASE_MODEL: "Base model of a GRPO adapter, from slmsql-hub",
                METRIC_SPACE: "slmsql ex metric: script, card, Gradio app and the slmsql-hub wheel",
                DEMO_SPACE: "slmsql-hub demo Space: app, its configuration, databases and the slmsql-hub wheel",
                DEMO_DATA: "The databases of the run's evaluated questions and example questions, for its demo Space",
                WORLD_BENCHMARK: "The world's evaluation splits, their databases and eval.yaml, from slmsql-hub",
            }[target.what]
        )
        commit = _upload(api, target, target.files, revision=revision, create_pr=create_pr, message=message)
        pr_url = commit.pr_url
    logger.info("pushed %s to %s (commit %s)", target.what, url, commit.oid)
    visible = existing.private if existing.private is not None else private
    return PushResult(
        target.what, target.repo_type, target.repo_id, url, commit.commit_url, commit.oid, pr_url, visible
    )


def push_training_card(
    output_dir: str | os.PathLike,
    repo_id: str,
    *,
    token: str | None = None,
    revision: str | None = None,
    card_dir: str | os.PathLike | None = None,
) -> Any:
    """Put the project's card in a repository training pushed to (``push_to_hub: true``): one commit adds
    ``README.md`` (the full card from ``card_dir``, else :func:`training_card`) and the run files TRL's last push
    predates, and deletes TRL's draft. Call it on the main process after ``run_summary.json`` is written;
    ``repo_id``, ``token``, ``revision`` are the trainer's ``hub_model_id``, ``hub_token``, ``hub_revision``.
    Returns the ``CommitInfo``.
    """
    from huggingface_hub.errors import HfHubHTTPError

    output_dir = Path(output_dir)
    summary_path = StageFolder(output_dir).summary
    if card_dir is None and not summary_path.is_file():
        raise UsageError(
            f"no {RUN_SUMMARY} in {output_dir}: call push_training_card after the run summary is written"
        )
    api, _ = _hub_api(token)
    target = PushTarget(MODEL, "model", check_repo_id(repo_id, "hub_model_id"))
    if card_dir is not None:
        upload: list[tuple[str, Path | bytes]] = folder_files(card_dir)
        if not any(path == CARD_README for path, _ in upload):
            raise UsageError(f"{card_dir} has no README.md: run `slmsql card` first")
    else:
        card = training_card(read_json_object(summary_path, "rerun training"), repo_id)
        upload = [(CARD_README, card.encode("utf-8"))]
        upload += [(name, output_dir / name) for name in TRAINING_RUN_FILES if (output_dir / name).is_file()]
    message = "Model card from slmsql-hub (replaces TRL's draft)"
    try:
        commit = _upload(api, target, upload, revision=revision, create_pr=False, message=message)
    except HfHubHTTPError as err:
        refused = _forbidden(err, target)
        if refused is not None:
            raise refused from err
        raise
    logger.info("card pushed to %s (commit %s)", repo_id, commit.oid)
    return commit
