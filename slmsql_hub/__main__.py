"""``python -m slmsql_hub ...`` is the ``slmsql`` command; ``accelerate launch -m slmsql_hub train grpo --config ...``
runs GRPO on several processes."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
