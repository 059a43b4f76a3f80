"""Names of the GRPO telemetry metrics that the card, the plots, the Hub files and the Space quote.

The GRPO trainer logs them (:mod:`~slmsql_hub.training.grpo`, which imports TRL); the readers only need their
names, so they live here, in a module that imports nothing.
"""

TRL_ZERO_STD_METRIC = "frac_reward_zero_std"
"""TRL's share of groups whose float32 reward std ``isclose`` 0; see :mod:`~slmsql_hub.training.zero_variance`."""

EXACT_ZERO_STD_METRIC = "frac_reward_zero_std_exact"
"""slmsql-hub's share of groups whose rewards' max equals their min (the groups whose advantage it sets to 0),
logged every step next to TRL's; the one to quote (see :mod:`~slmsql_hub.training.zero_variance`)."""
