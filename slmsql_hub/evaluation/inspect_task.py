"""The evaluation as an Inspect AI task: where the field evaluates (LightEval's backend, the Hub's verified results).

One task per benchmark ``slmsql eval`` evaluates (:func:`~slmsql_hub.evaluation.config.eval_benchmarks`), built
from the same parts, so that the two cannot disagree:

- the samples are :func:`~slmsql_hub.data.benchmarks.load_benchmark`'s rows (``NAME:SPLIT[:LIMIT]`` checked by
  :class:`~slmsql_hub.evaluation.config.BenchmarkSpec`, the same seeded subset), their prompts
  :func:`~slmsql_hub.data.prompts.build_prompts`' chats with the adapter's prompt settings
  (:func:`~slmsql_hub.data.prompts.resolve_prompt_config`);
- the scorer judges in process with the one execution core (:class:`~slmsql_hub.sql.Judge` and its sandbox, not
  Inspect's sandbox), in the benchmark's own comparison mode, under the recipes' :class:`~slmsql_hub.sql.Limits`:
  the verdicts of ``slmsql ex``. A question whose gold SQL fails (or an infrastructure failure) is
  ``Score.unscored()``: Inspect leaves a NaN score out of ``accuracy()`` and ``stderr()`` and counts it as an
  unscored sample, as ``slmsql eval`` leaves it out of EX (``NOANSWER`` would count as 0). Each score's metadata
  holds the verdict, the statuses and the limits;
- the model is the ``slmsql`` provider (:func:`model_api`): the base loaded with its LoRA adapter by
  :func:`~slmsql_hub.generation.load_policy` and decoded by :func:`~slmsql_hub.generation.generate_completions`
  (one prompt per call: ``slmsql eval`` at ``batch_size: 1``). Inspect's ``hf/`` provider loads no PEFT adapter
  on a separate base and stops at the tokenizer's eos, not at the end of the chat turn.

``inspect_ai`` is the optional extra ``slmsql-hub[inspect]``: this module imports it inside its functions, so
it imports without it; :mod:`slmsql_hub.evaluation.inspect_registry` registers the tasks and the provider.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from typing import TYPE_CHECKING, Any

from ..data.benchmarks import get_benchmark
from ..errors import UsageError
from ..sql.recipe_limits import SQLLimitsArguments, limits_record
from ..sql.result import Limits
from .config import BenchmarkSpec, eval_benchmarks

if TYPE_CHECKING:  # pragma: no cover
    from inspect_ai import Task
    from inspect_ai.scorer import Score, Scorer

    from ..sql import Judgement

logger = logging.getLogger(__name__)

INSPECT_HINT = "the Inspect AI task needs the optional extra: pip install 'slmsql-hub[inspect]'"
MODEL_API = "slmsql"
"""The Inspect model provider: ``--model slmsql/<base model> -M adapter=<adapter>``."""


def require_inspect() -> None:
    """:class:`UsageError` with the install line when ``inspect_ai`` is not installed."""
    if importlib.util.find_spec("inspect_ai") is None:
        raise UsageError(INSPECT_HINT)


def judgement_score(judgement: Judgement, limits: Limits) -> Score:
    """The Inspect ``Score`` of one :class:`~slmsql_hub.sql.Judgement`: ``C`` (correct) or ``I`` (any other
    verdict of the prediction), ``Score.unscored()`` when the example has no score (an unscorable gold, an
    infrastructure failure); the metadata holds the verdict, both statuses, the error and the limits."""
    from inspect_ai.scorer import CORRECT, INCORRECT, Score

    metadata = {
        **{k: v for k, v in judgement.to_dict().items() if k != "pred_sql"},
        "limits": limits_record(limits),
    }
    if not judgement.scorable:
        return Score.unscored(
            reason=judgement.verdict.value, answer=judgement.pred_sql, explanation=judgement.error, metadata=metadata
        )
    return Score(
        value=CORRECT if judgement.correct else INCORRECT,
        answer=judgement.pred_sql,
        explanation=judgement.error or judgement.verdict.value,
        metadata=metadata,
    )


def execution_scorer(
    mode: str = "bird", *, keep_distinct: bool = False, limits: Limits | None = None, workers: int | None = None
) -> Scorer:
    """The Inspect scorer of execution accuracy: the completion judged against the target (gold SQL) on the
    sample's ``metadata["db_path"]`` by one :class:`~slmsql_hub.sql.Judge` (started on first use), scored by
    :func:`judgement_score`; metrics ``accuracy()`` and ``stderr()`` over the scored samples."""
    require_inspect()
    from inspect_ai.scorer import accuracy, scorer, stderr

    from ..sql import Judge

    limits = limits or Limits()

    @scorer(metrics=[accuracy(), stderr()], name="execution_accuracy")
    def execution_accuracy() -> Scorer:
        judge: list[Judge] = []

        async def score(state: Any, target: Any) -> Score:
            if not judge:
                judge.append(Judge(mode=mode, keep_distinct=keep_distinct, limits=limits, workers=workers))
            judgement = judge[0].judge(state.output.completion, target.text, state.metadata["db_path"])
            return judgement_score(judgement, limits)

        return score

    return execution_accuracy()


def _sql_limits(sql_timeout_s: float, sql_max_ops: int | None, sql_max_rows: int, sql_max_result_bytes: int) -> Limits:
    """The recipes' limits fields, checked as the recipes check them (UsageError naming the field)."""
    fields = SQLLimitsArguments(
        sql_timeout_s=sql_timeout_s,
        sql_max_ops=sql_max_ops,
        sql_max_rows=sql_max_rows,
        sql_max_result_bytes=sql_max_result_bytes,
    )
    fields.resolve_sql_limits()
    return fields.sql_limits()


def benchmark_task(
    benchmark: str,
    root: str | os.PathLike,
    split: str | None = None,
    *,
    limit: int | None = None,
    seed: int = 0,
    adapter: str | None = None,
    sample_rows: int | None = None,
    max_value_chars: int | None = None,
    max_new_tokens: int = 256,
    keep_distinct: bool = False,
    sql_timeout_s: float = Limits.timeout_s,
    sql_max_ops: int | None = Limits.max_ops,
    sql_max_rows: int = Limits.max_rows,
    sql_max_result_bytes: int = Limits.max_result_bytes,
    workers: int | None = None,
    skip_missing_db: bool = False,
) -> Task:
    """The Inspect ``Task`` of one slice ``benchmark:split[:limit]`` under ``root`` (as ``slmsql eval``'s
    ``<name>_root``): greedy ``generate()`` of at most ``max_new_tokens``, then :func:`execution_scorer`.
    ``adapter`` (a local folder) gives the prompt settings it was trained with, unless ``sample_rows`` /
    ``max_value_chars`` say; the sample ids are the question ids, the metadata carries ``db_path``.

    Example:

    ```python
    >>> from slmsql_hub.evaluation.inspect_task import benchmark_task
    >>> benchmark_task("world", "outputs/quickstart/world", "rl_pool")
    Traceback (most recent call last):
    ...
    slmsql_hub.errors.UsageError: benchmark 'world:rl_pool': evaluate world on dev or test or probe_same or probe_cross or probe_control, not 'rl_pool' (training splits say nothing about held-out accuracy)

    ```
    """
    spec = BenchmarkSpec.parse(f"{benchmark}:{split or get_benchmark(benchmark).default_split}")
    spec = BenchmarkSpec(spec.name, spec.split, limit)
    limits = _sql_limits(sql_timeout_s, sql_max_ops, sql_max_rows, sql_max_result_bytes)
    require_inspect()
    from inspect_ai import Task
    from inspect_ai.model import GenerateConfig
    from inspect_ai.solver import generate

    from ..data.prompts import resolve_prompt_config

    prompt_config, _ = resolve_prompt_config(adapter, sample_rows, max_value_chars)
    samples = benchmark_samples(spec, root, prompt_config, seed=seed, skip_missing_db=skip_missing_db)
    return Task(
        name=spec.key,
        dataset=samples,
        solver=generate(),
        scorer=execution_scorer(spec.mode, keep_distinct=keep_distinct, limits=limits, workers=workers),
        config=GenerateConfig(max_tokens=max_new_tokens, temperature=0.0),
        metadata={"benchmark": spec.name, "split": spec.split, "mode": spec.mode, "limits": limits_record(limits)},
    )


def benchmark_samples(
    spec: BenchmarkSpec, root: str | os.PathLike, prompt_config: Any, *, seed: int = 0, skip_missing_db: bool = False
) -> Any:
    """The slice as an Inspect ``MemoryDataset``: one ``Sample`` per question (chat input, gold SQL target,
    question id, ``db_path``/``db_id``/``difficulty``/``question`` metadata), prompts built as ``slmsql eval``
    builds them."""
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessageSystem, ChatMessageUser

    from ..data.benchmarks import load_benchmark
    from ..data.prompts import build_prompts
    from ..sql import Sandbox

    rows = [dict(row) for row in load_benchmark(spec.name, root, spec.split, spec.limit, seed, skip_missing_db=skip_missing_db)]
    if not rows:
        raise UsageError(f"benchmark {spec.key} under {root} has no questions to evaluate")
    with Sandbox(workers=1) as sandbox:
        prompts = build_prompts(rows, prompt_config, sandbox)
    message = {"system": ChatMessageSystem, "user": ChatMessageUser}
    samples = [
        Sample(
            input=[message[m["role"]](content=m["content"]) for m in prompt],
            target=row["gold_sql"],
            id=row["question_id"],
            metadata={key: row[key] for key in ("db_path", "db_id", "difficulty", "question", "benchmark")},
        )
        for row, prompt in zip(rows, prompts)
    ]
    return MemoryDataset(samples, name=spec.key)


@functools.cache
def model_api() -> type:
    """The ``slmsql`` Inspect ``ModelAPI`` class: ``model_name`` is the base model, ``model_args`` are
    :func:`~slmsql_hub.generation.load_policy`'s (``adapter``, ``tokenizer``, ``dtype``, ``device``,
    ``revision``, ``adapter_revision``); decoding is greedy unless the config sets a temperature above 0."""
    require_inspect()
    from inspect_ai.model import GenerateConfig, ModelAPI, ModelOutput, ModelUsage

    from ..generation import GenerationConfig, generate_completions, load_policy

    class SlmsqlModelAPI(ModelAPI):
        def __init__(
            self,
            model_name: str,
            base_url: str | None = None,
            api_key: str | None = None,
            config: GenerateConfig = GenerateConfig(),  # noqa: B008 - Inspect's own signature
            **model_args: Any,
        ) -> None:
            super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config)
            adapter, pin = model_args.pop("adapter", None), model_args.pop("adapter_revision", None)
            self.model, self.tokenizer = load_policy(
                model_name, adapter, adapter_revisions={"default": pin} if pin else None, **model_args
            )

        async def generate(self, input: list, tools: list, tool_choice: Any, config: GenerateConfig) -> Any:
            sampled = bool(config.temperature)
            settings = GenerationConfig(
                max_new_tokens=config.max_tokens or 256,
                batch_size=1,
                do_sample=sampled,
                temperature=config.temperature if sampled else 1.0,
                top_p=config.top_p if sampled and config.top_p else 1.0,
                seed=config.seed if sampled else None,
            )
            chat = [{"role": message.role, "content": message.text} for message in input]
            ((completion,),) = generate_completions(self.model, self.tokenizer, [chat], settings, progress=False)
            output = ModelOutput.from_content(
                self.model_name, completion.text, stop_reason="stop" if completion.finished else "max_tokens"
            )
            output.usage = ModelUsage(output_tokens=completion.num_tokens, total_tokens=completion.num_tokens)
            return output

        def max_connections(self) -> int:
            return 1  # one prompt per generate call: slmsql eval's batch_size 1

    return SlmsqlModelAPI


__all__ = [
    "eval_benchmarks",
    "INSPECT_HINT",
    "MODEL_API",
    "benchmark_samples",
    "benchmark_task",
    "execution_scorer",
    "judgement_score",
    "model_api",
    "require_inspect",
]
