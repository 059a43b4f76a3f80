"""Numbers as the cards, reports and verdicts print them: percentages, fixed decimals, scientific notation,
signed percentage points and p-values."""

from __future__ import annotations

from typing import Any

_MINUS = "\u2212"  # the typeset minus of verdict sentences, not the ASCII hyphen


def format_points(value: float) -> str:
    """A fraction as signed percentage points with one decimal: ``+0.7``, ``−3.4`` (U+2212), ``0.0``.

    Example:

    ```python
    >>> format_points(0.007), format_points(-0.034), format_points(0.0), format_points(-0.0004)
    ('+0.7', '−3.4', '0.0', '0.0')

    ```
    """
    rounded = round(100 * value, 1)
    if rounded == 0:
        return "0.0"
    return f"+{rounded:.1f}" if rounded > 0 else f"{_MINUS}{-rounded:.1f}"


def format_p(p: float) -> str:
    """A p-value as shown in verdicts: two decimals from 0.1 up, three below (so 0.049 never prints as
    0.05), ``p < 0.001`` under.

    Example:

    ```python
    >>> format_p(0.8123), format_p(0.0491), format_p(0.00002), format_p(1.0)
    ('p = 0.81', 'p = 0.049', 'p < 0.001', 'p = 1.00')

    ```
    """
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}" if p < 0.1 else f"p = {p:.2f}"


def percent(fraction: float, decimals: int = 1) -> str:
    """A fraction as a percentage without the sign: ``0.5417`` -> ``54.2``.

    Example:

    ```python
    >>> from slmsql_hub.card.context import percent
    >>> percent(0.54166), percent(1.0), percent(0.125, 0)
    ('54.2', '100.0', '12')

    ```
    """
    return f"{100 * fraction:.{decimals}f}"


def number(value: Any, decimals: int = 3) -> str:
    """A number with ``decimals`` decimals (``n/a`` for a missing value).

    Example:

    ```python
    >>> from slmsql_hub.card.context import number
    >>> number(0.123456), number(None), number(38.26, 1)
    ('0.123', 'n/a', '38.3')

    ```
    """
    if value is None:
        return "n/a"
    return f"{float(value):.{decimals}f}"


def scientific(value: Any, digits: int = 2) -> str:
    """A small ratio in scientific notation (``0`` when exactly zero, ``n/a`` when missing).

    Example:

    ```python
    >>> from slmsql_hub.card.context import scientific
    >>> scientific(0.000321), scientific(0.0), scientific(None)
    ('3.21e-04', '0', 'n/a')

    ```
    """
    if value is None:
        return "n/a"
    return "0" if value == 0 else f"{float(value):.{digits}e}"
