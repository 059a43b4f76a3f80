"""Exceptions with one clear line for the user."""


class UsageError(Exception):
    """Bad input from the user (missing file, malformed config, mismatched lengths).

    The CLI prints ``str(err)`` as a single line and exits with code 2; library callers get a normal
    exception whose message names the fix.
    """
