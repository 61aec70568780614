"""`kppo.exporter.budget`: a budget read from its text, the choice among candidate reports (the best return that
fits, the smallest on a tie), the Pareto front, and the refusal naming the closest candidate's numbers; the
report's 95% interval and its degradation rule (`kppo.exporter.report`, `kppo.exporter.closed_loop`)."""

import numpy as np
import pytest

from kppo.exporter.budget import Budget, candidate_table, choose, parse_budget, pareto
from kppo.exporter.closed_loop import interval, t_975
from kppo.exporter.report import degraded


def _candidate(quantization, mean, size, arena, latency):
    """A candidate's report, the figures the budget reads."""
    return {
        "quantization": quantization,
        "size_bytes": size,
        "arena_bytes": arena,
        "latency": {"median_invoke_us": latency},
        "closed_loop": {"artifact": {"mean": mean, "ci95": [mean - 1, mean + 1]}, "degraded": False},
    }


CANDIDATES = [
    _candidate("float32", 500.0, 20_000, 3_000, 4.0),
    _candidate("float16", 500.0, 11_000, 3_000, 4.0),
    _candidate("dynamic", 498.0, 7_000, None, 3.5),  # TFLite Micro rejects dynamic-range models: no arena
    _candidate("int8", 496.0, 6_000, 2_500, 3.0),
]


def test_parse_budget_reads_sizes_and_times_in_their_units():
    assert parse_budget("flash=64KiB,ram=16KiB,latency=1ms") == Budget(65_536, 16_384, 1000.0)
    assert parse_budget(" RAM = 2KB , latency=250us") == Budget(None, 2000, 250.0)
    assert parse_budget("flash=1.5MiB") == Budget(1_572_864, None, None)


def test_the_best_return_that_fits_wins_and_a_tie_goes_to_the_smaller():
    assert CANDIDATES[choose(CANDIDATES, parse_budget("flash=64KiB"))]["quantization"] == "float16"
    assert CANDIDATES[choose(CANDIDATES, parse_budget("flash=10KB"))]["quantization"] == "dynamic"
    # a ram budget: the dynamic-range model has no TFLite Micro arena, so it fits none
    assert CANDIDATES[choose(CANDIDATES, parse_budget("flash=10KB,ram=4KiB"))]["quantization"] == "int8"


def test_an_impossible_budget_names_the_closest_candidate():
    with pytest.raises(ValueError) as info:
        choose(CANDIDATES, parse_budget("flash=5000,ram=2KiB"))
    assert str(info.value) == (
        "--budget: expected an artifact within flash 5,000 B, ram 2,048 B, got none of 4 candidates; the closest, "
        "int8: flash 6,000 B, ram 2,500 B, latency 3.0 us (flash over 5,000 B, ram over 2,048 B)"
    )


def test_the_pareto_table_marks_every_candidate():
    assert pareto(CANDIDATES) == [False, True, True, True]  # float32: float16 is as good and smaller
    rows = candidate_table(CANDIDATES, parse_budget("flash=10KB"), 2)
    assert [(r["quantization"], r["fits"], r["chosen"]) for r in rows] == [
        ("float32", False, False),
        ("float16", False, False),
        ("dynamic", True, True),
        ("int8", True, False),
    ]


def test_the_95_percent_interval_uses_students_t():
    assert t_975(19) == pytest.approx(2.093, abs=1e-3) and t_975(4) == 2.776
    stats = interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert stats["mean"] == 3.0 and stats["half_width"] == pytest.approx(
        2.776 * np.std([1, 2, 3, 4, 5], ddof=1) / 5**0.5
    )


def test_degraded_means_below_the_float_mean_by_more_than_2_percent_or_its_half_width():
    narrow = {"mean": 500.0, "half_width": 0.0}
    assert degraded(narrow, {"mean": 491.0}) == (False, 490.0)
    assert degraded(narrow, {"mean": 489.0}) == (True, 490.0)
    wide = {"mean": -200.0, "half_width": 30.0}  # the interval is wider than 2% of |mean| = 4
    assert degraded(wide, {"mean": -229.0}) == (False, -230.0)
    assert degraded(wide, {"mean": -231.0})[0]
