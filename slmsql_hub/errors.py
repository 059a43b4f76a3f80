"""Exceptions with one clear line for the user: bad input (:class:`UsageError`, exit code 2) and a failure of the
machine or a service (:class:`InfrastructureError`, exit code 1, ``-v`` shows its traceback). The CLI prints
``str(err)`` as a single line; the message names the fix, or what was done before the failure and how to resume."""


class UsageError(Exception):
    """Bad input from the user (missing file, malformed config, mismatched lengths)."""


class InfrastructureError(RuntimeError):
    """The machine or a service failed where the input was fine (the Hub unreachable or answering with a server
    error, a sandbox worker that cannot start); never turned into a verdict, a reward or a score."""
