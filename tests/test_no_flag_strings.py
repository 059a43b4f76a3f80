"""No ``--flag`` string is built outside the command-line parsers (issue #33).

Stages (and the benchmarks under benchmarks/) call each other with typed values (:func:`slmsql_hub.recipes.parse_recipe` ``values=``,
:meth:`slmsql_hub.commands.study.Stage.values`); turning a typed config back into ``--flag value`` strings that the
same process parses again read a negative learning rate as an option once (4fee998) and dropped a field another
time. A flag string here is a lone option in a list or tuple literal (``["--seed", str(seed)]``), an f-string that
is a whole option (``f"--{key}"``) or ``"--" + name``. Declaring options (``add_argument("--out")``) and naming
one in a message (``f"--out {out} is a file"``) are neither. The command lines of child processes and the ones
shown to a person are listed in :data:`ALLOWED` with the reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "slmsql_hub"
BENCHMARKS = PACKAGE.parent / "benchmarks"
FLAG = re.compile(r"--[A-Za-z][\w-]*(=.*)?")

ALLOWED = {
    # the command lines of child processes
    ("study/config.py", "WorldArm.world_build_args"):
        "the `slmsql world build` command line of a planted world, which the Makefile and Slurm jobs run",
    ("study/slurm.py", "SlurmOptions.directives"): "the #SBATCH lines of a Slurm job script",
    ("study/slurm.py", "StudyArgs.argv"): "the `slmsql ablate` command line a Slurm job runs",
    ("study/slurm.py", "world_jobs"): "the `slmsql ablate` command lines of a world's Slurm jobs",
    ("study/slurm.py", "transfer_jobs"): "the `slmsql` command lines of a transfer study's Slurm jobs",
    ("study/slurm.py", "_sbatch"): "the `sbatch` command line",
    ("hub/wheel.py", "package_wheel"): "the `pip wheel` command line",
    ("run/files.py", "last_commit"): "the `git log` command line that names a file's last commit",
    ("runtime.py", "code_commit"): "the `git status` command line that tells whether the package differs from its commit",
    # a command line shown to a person, never parsed
    ("commands/study.py", "Stage.argv"): "the `slmsql` command line a quickstart stage logs for a person to rerun",
    # the command-line parsers themselves: declaring options and naming the given ones in a one-line error
    ("commands/world.py", "add_parser"): "declares one --SPLIT option per world split",
    ("commands/ablate.py", "_combine"): "names the options given with --combine in its error",
    ("commands/ablate.py", "_run"): "names the Slurm-only options given without --slurm in its error",
    ("commands/ablate.py", "_slurm"): "names the options given with --slurm in its error",
    ("recipes.py", "parse_recipe"): "names the unknown --field overrides of a command line in its error",
}
"""``(module under slmsql_hub/, function)``: why it may build ``--flag`` strings."""


def _is_flag(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and FLAG.fullmatch(node.value) is not None
    if isinstance(node, ast.JoinedStr):  # f"--{key}" or f"--{key}={value}", not f"--out {out}: ..."
        parts = node.values
        return (len(parts) >= 2 and isinstance(parts[0], ast.Constant) and parts[0].value == "--"
                and isinstance(parts[1], ast.FormattedValue)
                and (len(parts) == 2 or str(getattr(parts[2], "value", "")).startswith("=")))  # fmt: skip
    return False


def flag_strings(source: str) -> list[tuple[str, int, str]]:
    """``(function, line, text)`` of every flag string built in ``source`` (see the module docstring).

    >>> flag_strings('def f(seed):\\n    return ["--seed", str(seed)]\\n')
    [('f', 2, "'--seed'")]
    >>> flag_strings('def f(p, out):\\n    p.add_argument("--out")\\n    raise ValueError(f"--out {out}: a file")\\n')
    []
    """
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            where = f"{where}.{node.name}" if where else node.name
        candidates: list[ast.AST] = []
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            candidates = list(node.elts)
        elif isinstance(node, ast.Dict):
            candidates = [key for key in node.keys if key is not None]
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Constant):
            candidates = [node] if node.left.value == "--" else [node.left]
        if isinstance(node, ast.JoinedStr) and _is_flag(node):
            candidates = [node]
        for candidate in candidates:
            if candidate is node or _is_flag(candidate) and not isinstance(candidate, ast.JoinedStr):
                found.append((where, candidate.lineno, ast.unparse(candidate)))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(ast.parse(source), "")
    return sorted(set(found), key=lambda item: item[1])


def _built(path: Path) -> list[tuple[str, int, str]]:
    return flag_strings(path.read_text(encoding="utf-8"))


def _module(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_no_flag_string_is_built_outside_the_cli_parsers_and_the_child_command_lines():
    found = [
        f"slmsql_hub/{_module(path)}:{line} in {where or 'the module'}: {text}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for where, line, text in _built(path)
        if (_module(path), where) not in ALLOWED
    ]
    assert not found, "stages call each other with typed values, not --flag strings:\n" + "\n".join(found)


def test_the_benchmarks_call_stages_with_typed_values_too():
    found = [f"benchmarks/{path.name}:{line} in {where or 'the module'}: {text}"
             for path in sorted(BENCHMARKS.glob("*.py")) for where, line, text in _built(path)]  # fmt: skip
    assert not found, "a benchmark calls a stage with values=, not --flag strings:\n" + "\n".join(found)


@pytest.mark.parametrize(("module", "where"), sorted(ALLOWED))
def test_each_allowed_place_still_builds_a_command_line(module, where):
    assert where in {w for w, _, _ in _built(PACKAGE / module)}, f"{module} {where}: remove it from ALLOWED"


@pytest.mark.parametrize(
    "source",
    [
        'args = [f"--{key}", str(value)]',
        'args += ["--num_threads", str(n)]',
        'for flag, value in (("--model_revision", r),):\n    pass',
        'options = {f"--{k}": v for k, v in sets.items()}',
        'argv = "--" + name',
    ],
)
def test_the_scan_finds_the_ways_a_flag_string_is_built(source):
    assert flag_strings(source), source
