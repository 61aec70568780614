"""Goodness-of-fit checks for random draws, at a false-alarm rate of 1e-3 (numpy only)."""

import math

import numpy as np

#: chi-square's 0.999 quantile by degrees of freedom (a table: scipy is not a test dependency).
CHI_SQUARE_999 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46}


def normal_cdf(mean: float = 0.0, std: float = 1.0):
    erf = np.vectorize(math.erf)
    return lambda x: 0.5 * (1.0 + erf((np.asarray(x, np.float64) - mean) / (std * math.sqrt(2.0))))


def gumbel_cdf(x):
    return np.exp(-np.exp(-np.asarray(x, np.float64)))


def uniform_cdf(low: float, high: float):
    return lambda x: np.clip((np.asarray(x, np.float64) - low) / (high - low), 0.0, 1.0)


def fits_cdf(sample: np.ndarray, cdf) -> bool:
    """Kolmogorov-Smirnov: the largest gap between the sample's CDF and `cdf` is below its 0.999 quantile."""
    x = np.sort(np.asarray(sample, np.float64))
    n = len(x)
    f = cdf(x)
    gap = max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))
    return bool(gap < 1.949 / math.sqrt(n))


def fits_frequencies(draws: np.ndarray, probs: np.ndarray) -> bool:
    """Pearson's chi-square of the counts of 0 .. len(probs)-1 in `draws` against `probs`."""
    counts = np.bincount(np.asarray(draws), minlength=len(probs))
    expected = np.asarray(probs, np.float64) * len(draws)
    return bool(
        counts.size == len(probs) and np.sum((counts - expected) ** 2 / expected) < CHI_SQUARE_999[len(probs) - 1]
    )
