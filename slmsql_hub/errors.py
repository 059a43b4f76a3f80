"""Exceptions with one clear line for the user: bad input (:class:`UsageError`, exit code 2) and a failure of the
machine or a service (:class:`InfrastructureError`, exit code 1, ``-v`` shows its traceback). The CLI prints
``str(err)`` as a single line; the message names the fix, or what was done before the failure and how to resume."""


class UsageError(Exception):
    """Bad input from the user (missing file, malformed config, mismatched lengths)."""


class InfrastructureError(RuntimeError):
    """The machine or a service failed where the input was fine (the Hub unreachable or answering with a server
    error, a sandbox worker that cannot start); never turned into a verdict, a reward or a score."""


def exit_not_a_command(module: str, kind: str) -> None:
    """What ``python -m slmsql_hub.training.KIND`` does: one line naming the command that trains, exit code 2
    (the command lives in the CLI, above the training layer; running the module must not exit 0 doing nothing)."""
    import sys

    print(  # noqa: T201 - the one line a user reads
        f"{module} is not a command: run `python -m slmsql_hub train {kind} --config RECIPE.yaml` (or `slmsql train "
        f"{kind} ...`; several processes: `accelerate launch -m slmsql_hub train {kind} --config RECIPE.yaml`)",
        file=sys.stderr,
    )
    sys.exit(2)
