"""Names of the GRPO telemetry metrics that the card, the plots, the Hub files and the Space quote.

The GRPO trainer logs them (:mod:`~slmsql_hub.training.grpo`, which imports TRL); the readers only need their
names, so they live here, in a module that imports nothing.

Example:

```python
>>> from slmsql_hub.training.metric_names import EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC
>>> EXACT_ZERO_STD_METRIC, TRL_ZERO_STD_METRIC
('frac_reward_zero_std_exact', 'frac_reward_zero_std')

```
"""

TRL_ZERO_STD_METRIC = "frac_reward_zero_std"
"""TRL's share of groups whose reward std ``isclose`` 0 (absolute tolerance 1e-8 on float32 rewards)."""

EXACT_ZERO_STD_METRIC = "frac_reward_zero_std_exact"
"""slmsql-hub's share of groups whose rewards' max equals their min, logged every step next to TRL's: eight
rewards of 1.2 have a computed float32 std of ~1e-7, so TRL's share misses those groups."""
