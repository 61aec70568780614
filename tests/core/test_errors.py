"""kppo's one-line errors are also the exceptions Stable-Baselines3 raises in the same case."""

import gymnasium as gym
import numpy as np
import pytest

from kppo.core.distributions import make_distribution
from kppo.core.errors import ArgumentError, ArgumentTypeError, NotSupportedError, first_line, reason
from kppo.gym_envs.spaces import check_action_space, check_observation_space
from kppo.sb3.arguments import minibatches, policy_config, split_schedule


@pytest.mark.parametrize(
    "cls, sb3_type",
    [(ArgumentError, AssertionError), (ArgumentTypeError, TypeError), (NotSupportedError, NotImplementedError)],
)
def test_each_class_is_a_value_error_and_sb3s_type(cls, sb3_type):
    err = cls("x: expected 1, got 2")
    assert isinstance(err, ValueError) and isinstance(err, sb3_type)
    assert (first_line(err), reason(err)) == (": x: expected 1, got 2", "x: expected 1, got 2")


@pytest.mark.parametrize(
    "call, sb3_type",
    [
        (lambda: split_schedule("fast", "learning_rate"), AssertionError),  # get_schedule_fn: assert callable(...)
        (lambda: minibatches(64, 1), AssertionError),  # PPO: assert buffer_size > 1
        (lambda: minibatches(0, 64), AssertionError),  # PPO: assert batch_size > 1
        (lambda: policy_config({"net_arch": [64, {"pi": [8], "vf": [8]}]}), TypeError),  # torch fails on the dict
        (lambda: policy_config({"sde_net_arch": [8]}), TypeError),  # an unexpected keyword of the policy
        (lambda: policy_config({"activation_fn": "sine"}), TypeError),
        (lambda: check_action_space(gym.spaces.Tuple((gym.spaces.Discrete(2),))), AssertionError),
        (lambda: check_action_space(gym.spaces.MultiBinary([2, 2])), AssertionError),  # get_action_dim's assert
        (lambda: check_action_space(gym.spaces.MultiDiscrete([[2, 2], [3, 3]])), NotImplementedError),
        (lambda: make_distribution(gym.spaces.Text(3)), AssertionError),
        (lambda: check_observation_space(gym.spaces.Tuple((gym.spaces.Discrete(2),))), NotImplementedError),
        (lambda: check_observation_space(gym.spaces.Box(0, 1, (0,))), AssertionError),
    ],
)
def test_sb3_programs_catch_what_sb3_raises(call, sb3_type):
    with pytest.raises(sb3_type) as err:
        call()
    assert isinstance(err.value, ValueError) and "\n" not in str(err.value)


def test_a_box_of_any_shape_is_an_action_space():
    check_action_space(gym.spaces.Box(-1, 1, (2, 3), np.float64))
