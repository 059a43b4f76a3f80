# Copyright 2025 the slmsql-hub developers. Licensed under the Apache License, Version 2.0.
"""slmsql/ex: execution accuracy (EX) for Text-to-SQL, judged in a read-only SQLite sandbox.

This is the script ``evaluate.load("slmsql/ex")`` loads. It stays thin: the work is done by
``slmsql_hub.metric.compute_execution_accuracy`` (install the ``slmsql-hub`` package).
"""

import datasets
import evaluate

from slmsql_hub.metric.compute import compute_execution_accuracy, restored_text, storable_text

_CITATION = """\
@inproceedings{yu2018spider,
  title     = {Spider: A Large-Scale Human-Labeled Dataset for Complex and Cross-Domain Semantic Parsing and Text-to-SQL Task},
  author    = {Yu, Tao and Zhang, Rui and Yang, Kai and Yasunaga, Michihiro and Wang, Dongxu and Li, Zifan and Ma, James and Li, Irene and Yao, Qingning and Roman, Shanelle and Zhang, Zilin and Radev, Dragomir},
  booktitle = {Proceedings of the 2018 Conference on Empirical Methods in Natural Language Processing},
  year      = {2018}
}
@inproceedings{zhong2020semantic,
  title     = {Semantic Evaluation for Text-to-SQL with Distilled Test Suites},
  author    = {Zhong, Ruiqi and Yu, Tao and Klein, Dan},
  booktitle = {Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing},
  year      = {2020}
}
@inproceedings{li2023bird,
  title     = {Can LLM Already Serve as A Database Interface? A BIg Bench for Large-Scale Database Grounded Text-to-SQLs},
  author    = {Li, Jinyang and Hui, Binyuan and Qu, Ge and Yang, Jiaxi and Li, Binhua and Li, Bowen and Wang, Bailin and Qin, Bowen and Geng, Ruiying and Huo, Nan and Zhou, Xuanhe and Ma, Chenhao and Li, Guoliang and Chang, Kevin C. C. and Huang, Fei and Cheng, Reynold and Li, Yongbin},
  booktitle = {Advances in Neural Information Processing Systems},
  year      = {2023}
}
"""

_DESCRIPTION = """\
Execution accuracy (EX) for Text-to-SQL: a prediction is correct when running it returns the same result as
running the gold SQL on the same SQLite database. Both queries run read-only in a sandbox of supervised
worker processes (writes, ATTACH and extensions are refused; each query has a deadline, an instruction
budget and a row cap). The SQL is pulled out of raw model output (the last ```sql block, or the text itself
when it starts with SELECT / WITH / VALUES), so chat-model answers can be passed as they are.

Two comparison rules, each matching its official evaluator verdict for verdict:
- "bird" (default): BIRD's rule, set(pred_rows) == set(gold_rows); row order and duplicates are ignored,
  column order matters.
- "spider": the Spider test-suite rule: DISTINCT is removed from both queries (unless keep_distinct),
  columns may be permuted, rows compare as a multiset, in order only when the gold SQL has ORDER BY.

EX is computed over scorable examples only: an example whose gold SQL fails to run is unscorable, counted
apart and never scored 0.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): model outputs or SQL queries, one per example.
    references (`list` of `str`): gold SQL queries, one per example.
    db_path (`list` of `str`): path of the SQLite database of each example.
    mode (`str`): "bird" (default) or "spider"; see the description.
    keep_distinct (`bool`): spider mode only: keep DISTINCT instead of removing it. Defaults to False.
    timeout_s (`float`): time limit per query in seconds, as in the official evaluators: a prediction that
        needs more is wrong, a gold that needs more is unscorable. Counted in CPU seconds, so a busy machine
        does not change a verdict. Defaults to 30.
    max_ops (`int`): SQLite instruction budget per query; running out is the prediction's timeout too.
        Defaults to 1e9 (about 4 to 20 s on one core).
    return_details (`bool`): also return one verdict per example, in input order. Defaults to False.
    workers (`int`): sandbox worker processes. Defaults to the number of CPU cores.
    sandbox (`slmsql_hub.sql.Sandbox`): an open sandbox to reuse across calls (its limits then apply).

Returns:
    execution_accuracy (`float`): correct / scored, in [0, 1].
    num_examples (`int`): examples given.
    num_scored (`int`): examples whose gold SQL ran; EX is over these.
    num_correct (`int`): correct predictions.
    num_unscorable (`int`): examples whose gold SQL failed; left out of EX.
    num_pred_errors (`int`): scored examples whose prediction did not run (SQLite error, refused by the
        sandbox, too many rows) or held no SQL.
    num_timeouts (`int`): scored examples whose prediction ran out of its time or instruction budget.
    num_infra_failures (`int`): examples lost to the machine (a query starved of CPU by busy cores until
        twice timeout_s, workers killed from outside); left out of EX, never scored 0.
    details (`list` of `dict`, with return_details=True): per example `correct` (1, 0, or None when
        not scored), `verdict` (correct, wrong, pred_error, pred_timeout, pred_too_large, pred_refused,
        no_sql, unscorable, infra_failure), `pred_sql`, `pred_status`, `gold_status` and `error`.

    When no example is scorable, EX is undefined and compute raises a UsageError saying why.

Examples:

    Load the metric (`evaluate.load("slmsql/ex")` loads the same script from the Hub, or offline after
    `slmsql install-metric`) and a toy database with a table singer(singer_id, name, country, age):

    >>> import evaluate
    >>> from slmsql_hub.metric import METRIC_SCRIPT, make_demo_database
    >>> ex = evaluate.load(str(METRIC_SCRIPT))
    >>> db = str(make_demo_database())

    A correct answer in a ```sql block, a wrong one and one that does not run:

    >>> results = ex.compute(
    ...     predictions=["```sql\\nSELECT count(*) FROM singer\\n```", "SELECT name FROM singer", "SELECT nme FROM singer"],
    ...     references=["SELECT count(*) FROM singer", "SELECT name FROM singer WHERE age > 40", "SELECT name FROM singer"],
    ...     db_path=[db, db, db],
    ...     workers=1,
    ... )
    >>> round(results["execution_accuracy"], 4), results["num_scored"], results["num_pred_errors"]
    (0.3333, 3, 1)

    Columns in another order: wrong under the BIRD rule, correct under the Spider rule:

    >>> pred, gold = ["SELECT age, name FROM singer"], ["SELECT name, age FROM singer"]
    >>> ex.compute(predictions=pred, references=gold, db_path=[db], workers=1)["execution_accuracy"]
    0.0
    >>> ex.compute(predictions=pred, references=gold, db_path=[db], mode="spider", workers=1)["execution_accuracy"]
    1.0

    A gold query that fails makes its example unscorable, not wrong:

    >>> results = ex.compute(
    ...     predictions=["SELECT name FROM singer", "SELECT 1"],
    ...     references=["SELECT name FROM singer", "SELECT missing_column FROM singer"],
    ...     db_path=[db, db],
    ...     return_details=True,
    ...     workers=1,
    ... )
    >>> results["execution_accuracy"], results["num_unscorable"]
    (1.0, 1)
    >>> [(d["verdict"], d["correct"]) for d in results["details"]]
    [('correct', 1), ('unscorable', None)]
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ExecutionAccuracy(evaluate.Metric):
    """Execution accuracy for Text-to-SQL, judged in a read-only SQLite sandbox."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "references": datasets.Value("string"),
                    "db_path": datasets.Value("string"),
                }
            ),
            homepage="https://huggingface.co/spaces/slmsql/ex",
            license="apache-2.0",
            reference_urls=[
                "https://github.com/taoyds/test-suite-sql-eval",
                "https://github.com/bird-bench/mini_dev",
            ],
        )

    # Arrow (evaluate's input cache) cannot hold text that is not UTF-8; such text is judged as an error.
    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Add a batch of predictions and references (see ``evaluate.Metric.add_batch``)."""
        predictions = None if predictions is None else [storable_text(p) for p in predictions]
        references = None if references is None else [storable_text(r) for r in references]
        if kwargs.get("db_path") is not None:
            kwargs["db_path"] = [storable_text(p) for p in kwargs["db_path"]]
        return super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Add one prediction and reference (see ``evaluate.Metric.add``)."""
        if kwargs.get("db_path") is not None:
            kwargs["db_path"] = storable_text(kwargs["db_path"])
        return super().add(prediction=storable_text(prediction), reference=storable_text(reference), **kwargs)

    def _compute(
        self,
        predictions,
        references,
        db_path,
        mode="bird",
        keep_distinct=False,
        timeout_s=30.0,
        max_ops=1_000_000_000,
        return_details=False,
        workers=None,
        sandbox=None,
    ):
        return compute_execution_accuracy(
            [restored_text(p) for p in predictions],
            [restored_text(r) for r in references],
            [restored_text(p) for p in db_path],
            mode=mode,
            keep_distinct=keep_distinct,
            timeout_s=timeout_s,
            max_ops=max_ops,
            return_details=return_details,
            workers=workers,
            sandbox=sandbox,
        )
