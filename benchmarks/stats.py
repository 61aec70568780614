"""Small-sample statistics for the results table (numpy only): percentile bootstrap of the mean, a two-sided
permutation test on the difference of means, and the per-(task, framework) summaries built from them.

Reference: Efron & Tibshirani, "An Introduction to the Bootstrap" (1993), ch. 13 (percentile interval) and ch. 15
(permutation test). Every random draw comes from `np.random.default_rng(seed)` with a fixed seed, so the table is
reproducible from the records.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

N_RESAMPLES = 10_000  # bootstrap resamples
EXACT_LIMIT = 20_000  # permutation test: enumerate every split up to this many, else draw N_PERMUTATIONS
N_PERMUTATIONS = 20_000
SEED = 0


def bootstrap_mean_ci(values, level: float = 0.95, n_resamples: int = N_RESAMPLES, seed: int = SEED):
    """Percentile bootstrap interval of the mean over axis 0.

    Draws `n_resamples` samples of size n with replacement from `values` (the seeds, axis 0), takes each one's mean,
    and returns the (1 - level) / 2 and (1 + level) / 2 percentiles of those means (numpy's linear interpolation).

    Args:
        values: [n] or [n, ...] float-like; n >= 1 (with n = 1 the interval is the value itself).
        level: coverage, in (0, 1). Defaults to `0.95`.
        n_resamples: number of bootstrap samples. Defaults to `10_000`.
        seed: seed of the generator. Defaults to `0`.

    Returns:
        (low, high): floats for [n] input, arrays of shape [...] otherwise.

    Raises:
        ValueError: no values, or a level outside (0, 1).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim == 0 or x.shape[0] == 0:
        raise ValueError(f"values: expected at least one value along axis 0, got shape {x.shape}")
    if not 0 < level < 1:
        raise ValueError(f"level: expected a number in (0, 1), got {level!r}")
    n = x.shape[0]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    means = x[idx].mean(axis=1)  # [n_resamples, ...]
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    if x.ndim == 1:
        return float(low), float(high)
    return low, high


class Permutation(NamedTuple):
    """Result of `permutation_test`."""

    p_value: float
    p_min: float  # the smallest p-value these sample sizes (and ties) allow: with 3 vs 3 seeds, 0.1
    exact: bool  # True: every split enumerated; False: random permutations
    n_splits: int  # splits enumerated, or permutations drawn


def permutation_test(
    a, b, exact_limit: int = EXACT_LIMIT, n_permutations: int = N_PERMUTATIONS, seed: int = SEED
) -> Permutation:
    """Two-sided permutation test of equal means: statistic |mean(a) - mean(b)| over the splits of the pooled values.

    Exact when the pooled n choose len(a) splits number at most `exact_limit`: p = (splits with a statistic >= the
    observed one) / (all splits), the observed split included. Otherwise `n_permutations` random permutations:
    p = (1 + permutations with a statistic >= the observed one) / (1 + n_permutations) (Phipson & Smyth 2010,
    https://doi.org/10.2202/1544-6115.1585). Statistics within 1e-9 x the largest |value| of the observed one count
    as ties (sums in another order differ in the last bits), so identical samples give p = 1.

    Args:
        a, b: [n_a], [n_b] float-like, n_a, n_b >= 1.
        exact_limit: enumerate every split up to this many. Defaults to `20_000`.
        n_permutations: random permutations otherwise. Defaults to `20_000`.
        seed: seed of the generator (random permutations only). Defaults to `0`.

    Returns:
        Permutation(p_value, p_min, exact, n_splits).

    Raises:
        ValueError: an empty sample.
    """
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError(f"a, b: expected at least one value each, got {a.size} and {b.size}")
    pooled, k = np.concatenate([a, b]), a.size
    n_splits = math.comb(pooled.size, k)
    exact = n_splits <= exact_limit
    if exact:
        members = np.array(list(itertools.combinations(range(pooled.size), k)))  # [n_splits, k]: a's indices
    else:
        members = np.random.default_rng(seed).permuted(np.tile(np.arange(pooled.size), (n_permutations, 1)), axis=1)[
            :, :k
        ]
        n_splits = n_permutations
    sums = pooled[members].sum(axis=1)
    stats = np.abs(sums / k - (pooled.sum() - sums) / b.size)
    observed = abs(a.mean() - b.mean())
    tol = 1e-9 * max(1.0, float(np.abs(pooled).max()))
    hits = int((stats >= observed - tol).sum())
    extreme = int((stats >= stats.max() - tol).sum())
    if exact:
        return Permutation(hits / n_splits, extreme / n_splits, True, n_splits)
    return Permutation((1 + hits) / (1 + n_splits), 1 / (1 + n_splits), False, n_splits)


def summarize(finals, zoo: float, wall_s=(), steps_per_s=()) -> dict:
    """One (task, framework) cell group: the final returns over seeds against the zoo number.

    Args:
        finals: [n] final mean returns, one per seed (seed order).
        zoo: the RL-Zoo number.
        wall_s, steps_per_s: per-seed timings (averaged; NaN when empty).

    Returns:
        seeds, mean, std (population), ci (95% percentile bootstrap of the mean, or None for one seed), per_seed,
        seeds_reached (seeds >= zoo), reached (mean >= zoo), wall_s, steps_per_s.
    """
    x = np.asarray(finals, dtype=np.float64)
    return {
        "seeds": int(x.size),
        "mean": float(x.mean()),
        "std": float(x.std()),
        "ci": bootstrap_mean_ci(x) if x.size > 1 else None,
        "per_seed": [float(v) for v in x],
        "seeds_reached": int((x >= zoo).sum()),
        "reached": bool(x.mean() >= zoo),
        "wall_s": float(np.mean(wall_s)) if len(wall_s) else float("nan"),
        "steps_per_s": float(np.mean(steps_per_s)) if len(steps_per_s) else float("nan"),
    }


def compare(ours: dict, reference: dict) -> dict:
    """A framework against the reference (SB3): permutation test, inside the reference's interval, ratio of means.

    Args:
        ours, reference: `summarize` results (their `per_seed` values are tested).

    Returns:
        test (`Permutation`), inside (ours' mean within reference's 95% interval; None when the reference has one
        seed, so no interval), ratio (ours' mean / reference's mean; None when the reference's mean is 0).
    """
    ci = reference["ci"]
    return {
        "test": permutation_test(ours["per_seed"], reference["per_seed"]),
        "inside": None if ci is None else bool(ci[0] <= ours["mean"] <= ci[1]),
        "ratio": None if reference["mean"] == 0 else ours["mean"] / reference["mean"],
    }
