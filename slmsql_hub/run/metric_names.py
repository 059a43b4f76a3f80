"""Names of the GRPO telemetry metrics the card, the plots, the Hub files and the Space quote (a module that
imports nothing, so readers need not import TRL). What they measure: :mod:`~slmsql_hub.training.zero_variance`.
"""

TRL_ZERO_STD_METRIC = "frac_reward_zero_std"
EXACT_ZERO_STD_METRIC = "frac_reward_zero_std_exact"
"""The one to quote: the share of groups whose rewards' max equals their min."""
