"""slmsql-hub: outcome-only GRPO for Text-to-SQL, Hub-native.

The package is organised as the pipeline runs: ``sql`` (the one place SQL is executed and judged),
``data`` (benchmarks and the embedded world), ``rewards``, ``filtering``, ``generation``, ``training``,
``evaluation``, ``card``, ``hub`` and ``cli``. Importing it does no I/O.
"""

__version__ = "0.1.0"
