"""Every integer Config field has an upper bound, checked at Config time (`kppo.config.validation.INT_BOUNDS`)."""

import dataclasses

import pytest

import kppo
from kppo.config.fields import ConfigFields
from kppo.config.validation import DERIVED_BOUNDS, INT_BOUNDS


def test_every_integer_field_has_a_bound():
    integers = {f.name for f in dataclasses.fields(ConfigFields) if f.type in ("int", "int | None")}
    assert integers == set(INT_BOUNDS)


#: What a field past its bound needs besides it so that nothing else is refused first (a rollout within the run).
OTHERS = {"num_envs": dict(total_timesteps=2**28), "num_steps": dict(total_timesteps=2**29)}
#: Fields whose own rule refuses the value first, naming the field and the value all the same.
OWN_RULE = {"advantage_std_ddof", "verbose", "num_minibatches", "lstm_sequence_length"}


@pytest.mark.parametrize("name", sorted(INT_BOUNDS))
def test_a_value_past_its_bound_is_refused_in_one_line(name):
    bound = INT_BOUNDS[name]
    expected = r".*" if name in OWN_RULE else rf"an integer <= {bound:,}"
    with pytest.raises(ValueError, match=rf"^{name}: expected {expected}, got {bound + 1}$"):
        kppo.Config(**{name: bound + 1}, **OTHERS.get(name, {}))


def test_total_timesteps_past_the_step_counters_is_refused():
    """1e19 steps overflow the int64 step counters: refused at once instead of a run without end."""
    with pytest.raises(ValueError, match=r"^total_timesteps: expected an integer <= 9,223,372,036,854,775,807, got 1"):
        kppo.Config(total_timesteps=10**19)
    with pytest.raises(ValueError, match=r"^total_timesteps / \(num_envs \* num_steps\): expected at most 2,147,"):
        kppo.Config(total_timesteps=2**40, num_envs=1, num_steps=2, num_minibatches=1)  # the int32 iteration count
    assert [name for name, _, _ in DERIVED_BOUNDS] == [
        "num_envs * num_steps",
        "total_timesteps / (num_envs * num_steps)",
    ]


def test_the_bounds_themselves_are_accepted():
    kppo.Config(seed=INT_BOUNDS["seed"], n_lstm_layers=INT_BOUNDS["n_lstm_layers"], eval_freq=INT_BOUNDS["eval_freq"])
