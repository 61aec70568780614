"""Property-based tests of `Config(**fields)` (Hypothesis): random field names, types and values either build a
config or raise kppo's one-line error naming a field; a built config survives `to_dict` / `from_dict`. The default
profile tries `CASES` examples; `-m slow` tries `SLOW_CASES`."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from kppo.config.options import Config
from tests.helpers.fuzz import fast, slow

FIELDS = [f.name for f in dataclasses.fields(Config)]

#: What a user (or a YAML file) may put in a field: every JSON-ish kind, the edge numbers among them.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.sampled_from([0, 1, -1, 2, 3, 4, 7, 8, 64, 128, 2048]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 0.5, 1.0, 1e-8, -0.1, 0.99, float("nan"), float("inf")]),
    st.text(max_size=10),
    st.sampled_from(["linear", "constant", "lstm", "tanh", "relu", "nature_cnn", "flatten", "adam", "torch", "clip"]),
    st.lists(st.integers(-3, 300), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(-3, 3), max_size=2),
)
NAMES = st.one_of(st.sampled_from(FIELDS), st.text(min_size=1, max_size=12))


def check(fields: dict) -> None:
    """The contract for one call."""
    try:
        config = Config(**fields)
    except (ValueError, TypeError) as err:
        message = str(err)
        assert message and "\n" not in message, f"{type(err).__name__} not one line: {message!r}"
        named = any(name in message or repr(name) in message for name in fields)
        assert named, f"names no field of {sorted(fields)}: {message!r}"
        event(f"refused: {type(err).__name__}")
        return
    event("built")
    again = Config.from_dict(config.to_dict())
    for name in FIELDS:
        a, b = getattr(config, name), getattr(again, name)
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), name


@given(st.dictionaries(NAMES, VALUES, max_size=4))
@fast()
def test_config_builds_or_refuses_in_one_line(fields):
    check(fields)


@given(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=3))
@fast()
def test_known_fields_with_any_value_build_or_refuse_in_one_line(fields):
    """Only real field names: each value reaches the field's coercion and validation."""
    check(fields)


@pytest.mark.slow
@given(st.dictionaries(NAMES, VALUES, max_size=6))
@slow()
def test_config_builds_or_refuses_in_one_line_at_scale(fields):
    check(fields)


@pytest.mark.slow
@given(st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=4))
@slow()
def test_known_fields_with_any_value_at_scale(fields):
    check(fields)


#: Small valid settings of the fields that shape a run (the rest at their defaults).
VALID = st.fixed_dictionaries(
    {
        "num_envs": st.sampled_from([1, 2, 4]),
        "num_steps": st.sampled_from([4, 8, 16]),
        "num_epochs": st.integers(1, 3),
        "num_minibatches": st.sampled_from([1, 2]),
        "num_hidden_units": st.sampled_from([4, 8]),
        "learning_rate": st.floats(1e-5, 1e-2),
        "gamma": st.floats(0.5, 1.0),
        "normalize_obs": st.booleans(),
        "normalize_reward": st.booleans(),
        "target_kl": st.one_of(st.none(), st.floats(0.001, 0.1)),
        "clip_range_vf": st.one_of(st.none(), st.floats(0.01, 1.0)),
    }
)


@pytest.mark.slow
@given(VALID)
@slow(10)
def test_a_valid_config_trains_one_iteration(fields):
    import kppo

    config = Config(**fields, eval_freq=1, num_eval_envs=1, jit_rollout=False)
    config = config.replace(total_timesteps=config.rollout_size)
    result = kppo.train("cartpole", config)
    assert int(result.runner_state.iteration) == 1
