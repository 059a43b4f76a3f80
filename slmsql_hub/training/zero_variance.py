"""Zero-variance groups: GRPO groups whose rewards are all equal, which must give no gradient.

A sample's advantage is its reward minus its group's mean (divided by a std under ``scale_rewards`` ``group``
or ``batch``), so a flat group's advantages are 0 in exact arithmetic. In float32 they need not be: TRL's
``nanmean`` of eight rewards of 1.2 (correct + ```sql block) or 0.2 rounds, the mean is one ulp off on CPU, the
std is ~1e-7 (1.2) or ~1.6e-8 (0.2), and each sample gets an advantage of ~1e-3. Adam normalises the gradient,
so those crumbs make a full-size step: GRPO with the format reward alone, every group flat, measured
``grad_norm`` 1.7e-5, 1.2e-4, 3.2e-5 on its first steps and changed the adapter. Whether the sum is exact depends
on the device's summation order (a CUDA tree reduction may be exact), so the same run can differ between machines.

slmsql-hub therefore:

- sets the advantage of every sample of a **flat group** (its scorable samples' total rewards have ``max ==
  min``, compared exactly: :func:`flat_groups`) to exactly 0 after TRL computed the others, for every
  ``scale_rewards``, over all processes' groups; a step of flat groups only then has ``grad_norm`` exactly 0
  (with ``beta: 0``) and leaves the adapter bit-identical;
- logs ``frac_reward_zero_std_exact``, the share of flat groups with at least two scorable samples, next to
  TRL's ``frac_reward_zero_std`` (``isclose(std, 0)``, absolute tolerance 1e-8, on the rounded std), which on
  CPU misses flat groups of 1.2 or 0.2 (it reads 0.0 on the world runs). Quote the exact one; TRL's is logged
  as TRL logs it.

This is the one place that explains it; the card, the plots, the Space and the READMEs point here.
"""

from __future__ import annotations

from typing import Any

_SUM_THEN_NORMALIZE = "sum_then_normalize"  # TRL's default multi_objective_aggregation


def flat_groups(
    rewards_per_func: Any, weights: Any, num_generations: int, aggregation: str = _SUM_THEN_NORMALIZE
) -> tuple[Any, Any]:
    """``(flat, scorable)``: per group of ``num_generations`` consecutive rows of ``rewards_per_func`` (``(samples,
    functions)``, NaN for ``None``), whether it is flat and how many scorable rows (not all NaN) it has.

    Under ``sum_then_normalize`` a group is flat when the weighted totals (``nansum``, as TRL sums them) of its
    scorable rows have ``max == min``; under ``normalize_then_sum`` when each function's non-NaN values do. A
    group without a scorable row is flat.

    Example:

    ```python
    >>> import torch
    >>> rewards = torch.tensor([[1.0, 0.2]] * 8 + [[1.0, 0.2]] * 4 + [[0.1, 0.2]] * 4)
    >>> flat, scorable = flat_groups(rewards, torch.ones(2), 8)
    >>> flat.tolist(), scorable.tolist()
    ([True, False], [8, 8])

    ```
    """
    import torch

    unscorable = torch.isnan(rewards_per_func).all(dim=1)
    scorable = (~unscorable).view(-1, num_generations).sum(dim=1)
    if aggregation == _SUM_THEN_NORMALIZE:
        weight = torch.as_tensor(weights, dtype=rewards_per_func.dtype).to(rewards_per_func.device)
        values = (rewards_per_func * weight).nansum(dim=1)
        values[unscorable] = torch.nan
        values = values.view(-1, num_generations, 1)
    else:
        values = rewards_per_func.view(-1, num_generations, rewards_per_func.shape[1])
    valid = ~torch.isnan(values)
    high = torch.where(valid, values, torch.full_like(values, -torch.inf)).amax(dim=1)
    low = torch.where(valid, values, torch.full_like(values, torch.inf)).amin(dim=1)
    flat = ((high == low) | ~valid.any(dim=1)).all(dim=1)
    return flat, scorable


def frac_zero_std_groups(
    rewards_per_func: Any, weights: Any, num_generations: int, aggregation: str = _SUM_THEN_NORMALIZE
) -> float:
    """``frac_reward_zero_std_exact``: the share of groups that are flat (:func:`flat_groups`) and have at least
    two scorable samples (with fewer there is no variance to speak of, as in TRL).

    Example:

    ```python
    >>> import torch
    >>> all_right = [[1.0, 0.2]] * 8                    # every sample correct, with a sql block: 1.2 each
    >>> mixed = [[1.0, 0.2]] * 4 + [[0.1, 0.2]] * 4
    >>> frac_zero_std_groups(torch.tensor(all_right + mixed), torch.ones(2), 8)
    0.5

    ```
    """
    flat, scorable = flat_groups(rewards_per_func, weights, num_generations, aggregation)
    if flat.numel() == 0:
        return 0.0
    return float((flat & (scorable >= 2)).double().mean().item())


def zero_flat_advantages(advantages: Any, flat_samples: Any, process_index: int) -> Any:
    """``advantages`` (this process's, ``(samples,)`` or ``(samples, tokens)``) with the samples of flat groups set
    to exactly 0. ``flat_samples`` has one bool per sample of **every** process (the gathered batch); this
    process's are its ``process_index``-th slice.

    Example:

    ```python
    >>> import torch
    >>> flat = torch.tensor([True, True, False, False])     # two processes, one group of two samples each
    >>> zero_flat_advantages(torch.tensor([1e-3, -1e-3]), flat, process_index=0).tolist()
    [0.0, 0.0]
    >>> zero_flat_advantages(torch.tensor([1.5, -1.5]), flat, process_index=1).tolist()
    [1.5, -1.5]

    ```
    """
    n = advantages.shape[0]
    local = flat_samples[process_index * n : (process_index + 1) * n].to(advantages.device)
    if advantages.dim() > 1:
        local = local.view(-1, *([1] * (advantages.dim() - 1)))
    return advantages.masked_fill(local, 0.0)
