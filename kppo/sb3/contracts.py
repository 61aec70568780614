"""Stable-Baselines3's and sb3-contrib's own checks, with their exception classes and messages, so that an SB3
program's `pytest.raises(AssertionError)`, `except ValueError` or `pytest.warns(UserWarning, match=...)` meets kppo
as it meets SB3: each message starts with SB3's words and ends with kppo's one-line help (what, expected, got).

Sources: stable_baselines3/common/utils.py (`is_vectorized_*_observation`), common/preprocessing.py
(`check_for_nested_spaces`), common/base_class.py (MlpPolicy on a Dict), common/policies.py (`squash_output`),
ppo/ppo.py (`batch_size`, `n_steps * n_envs`, the truncated
mini-batch warning), sb3_contrib/common/recurrent/policies.py (shared LSTM asserts) and torch's `nn.LSTM`
(RuntimeError for a hidden state of another shape) and `load_state_dict` (RuntimeError for missing keys).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np
from gymnasium import spaces

from kppo.core.errors import ArgumentError, NotSupportedError
from kppo.agent.extractors import NATURE_CNN_ASSERT
from kppo.gym_envs.spaces import is_image_space

__all__ = [
    "NESTED_SPACES",
    "StateDictError",
    "TorchShapeError",
    "check_batch_size",
    "check_cnn_space",
    "check_observation_shape",
    "check_policy_space",
    "check_recurrent_inputs",
    "check_shared_lstm",
    "check_squash_output",
    "policy_hint",
    "truncated_minibatch_warning",
]

#: SB3's `check_for_nested_spaces` message.
NESTED_SPACES = "Nested observation spaces are not supported (Tuple/Dict space inside Tuple/Dict space)."


class TorchShapeError(ValueError, RuntimeError):
    """A tensor of another shape where sb3-contrib's torch layers raise RuntimeError (an LSTM state, the episode
    starts); a ValueError too, as every kppo refusal."""


class StateDictError(ValueError, RuntimeError):
    """Parameters whose names do not match the model's, where torch's `load_state_dict` raises RuntimeError
    (SB3's `set_parameters`); a ValueError too, as every kppo refusal."""


def _help(sb3: str, kppo: str) -> str:
    """SB3's message, then kppo's one-line help."""
    return f"{sb3} ({kppo})"


def _box_message(shape: tuple, space: spaces.Space, kind: str) -> str:
    space_shape = tuple(space.shape or ())
    if kind == "Discrete":
        return (
            f"Error: Unexpected observation shape {shape} for Discrete environment, please use () or (n_env,) for "
            f"the observation shape."
        )
    if kind == "MultiDiscrete":
        n = len(space.nvec)  # type: ignore[attr-defined]
        return (
            f"Error: Unexpected observation shape {shape} for MultiDiscrete environment, please use ({n},) or "
            f"(n_env, {n}) for the observation shape."
        )
    if kind == "MultiBinary":
        return (
            f"Error: Unexpected observation shape {shape} for MultiBinary environment, please use {space_shape} or "
            f"(n_env, {space.n}) for the observation shape."  # type: ignore[attr-defined]
        )
    return (
        f"Error: Unexpected observation shape {shape} for Box environment, please use {space_shape} or "
        f"(n_env, {', '.join(map(str, space_shape))}) for the observation shape."
    )


def _leaf_shape_ok(shape: tuple, space: spaces.Space) -> bool:
    space_shape = tuple(space.shape or ())
    if isinstance(space, spaces.Discrete):
        return len(shape) <= 1
    return shape == space_shape or (shape[1:] == space_shape and len(shape) == len(space_shape) + 1)


def check_observation_shape(observation: Any, space: spaces.Space) -> None:
    """SB3's `is_vectorized_observation` refusals: an observation that is neither one of `space` nor a batch of
    them is a ValueError with SB3's message, then kppo's (`obs: expected ...`). Anything that is not an array of
    numbers is left to kppo's own checks."""
    if isinstance(space, spaces.Dict):
        if not isinstance(observation, dict) or set(observation) != set(space.spaces):
            return
        shapes = {key: np.shape(observation[key]) for key in space.spaces}
        if all(shapes[k] == tuple(space[k].shape or ()) for k in space.spaces):
            return
        if all(shapes[k][1:] == tuple(space[k].shape or ()) for k in space.spaces):
            return
        key = next(k for k in space.spaces if shapes[k][1:] != tuple(space[k].shape or ()))
        expected = tuple(space[key].shape or ())
        inner = (
            "" if _leaf_shape_ok(shapes[key], space[key]) else _box_message(shapes[key], space[key], _kind(space[key]))
        )
        raise ValueError(
            _help(
                f"There seems to be a mix of vectorized and non-vectorized observations. Unexpected observation "
                f"shape {shapes[key]} for key {key} of type {space[key]}. {inner}".rstrip(),
                f"obs[{key!r}]: expected shape {expected} or [N, *{expected}] under every key alike, got {shapes[key]}",
            )
        )
    try:
        array = np.asarray(observation)
    except (ValueError, TypeError):  # ragged lists: kppo's own one-line error names them
        return
    if array.dtype.kind not in "biuf":  # strings, objects: kppo's own one-line error names them
        return
    shape = array.shape
    if space.shape is None or _leaf_shape_ok(shape, space):
        return
    expected = tuple(space.shape)
    raise ValueError(
        _help(
            _box_message(shape, space, _kind(space)), f"obs: expected shape {expected} or [N, *{expected}], got {shape}"
        )
    )


def _kind(space: spaces.Space) -> str:
    for kind in ("Discrete", "MultiDiscrete", "MultiBinary"):
        if isinstance(space, getattr(spaces, kind)):
            return kind
    return "Box"


def check_policy_space(policy: str, space: spaces.Space) -> None:
    """SB3's refusals of an observation space for `policy`: a Dict under MlpPolicy / CnnPolicy (ValueError: SB3
    asks for MultiInputPolicy; sb3-contrib's Lstm policies alike) and nested Dict / Tuple spaces
    (NotImplementedError, SB3's `check_for_nested_spaces`)."""
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        inner = space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces
        if any(isinstance(sub, (spaces.Dict, spaces.Tuple)) for sub in inner):
            raise NotSupportedError(
                _help(
                    NESTED_SPACES,
                    f"observation_space: expected a Dict of Box, Discrete, MultiDiscrete or "
                    f"MultiBinary spaces, got {space}; flatten the inner Dict into the outer one",
                )
            )
    multi = "MultiInputLstmPolicy" if "Lstm" in policy else "MultiInputPolicy"
    if isinstance(space, spaces.Dict) and policy in ("MlpPolicy", "CnnPolicy", "MlpLstmPolicy", "CnnLstmPolicy"):
        raise ValueError(
            _help(
                f"You must use `{multi}` when working with dict observation space, not {policy}",
                f"policy: expected {multi!r} for a Dict observation space, got {policy!r}",
            )
        )


def check_cnn_space(policy: str, given: spaces.Space, model_space: spaces.Space, policy_kwargs: dict) -> None:
    """SB3's NatureCNN reads the observation space of the env it is given: a VecNormalize with `norm_obs` makes its
    images float32 Boxes, which NatureCNN refuses unless `normalize_images=False` (SB3 asserts). kppo's model reads
    the images under it (`model_space`), so this is checked here, on the space SB3 would see."""
    extractor = policy_kwargs.get("features_extractor_class")
    if policy not in ("CnnPolicy", "CnnLstmPolicy") or (extractor is not None and extractor.__name__ != "NatureCNN"):
        return
    if policy_kwargs.get("normalize_images", True) is False or given == model_space:
        return
    if is_image_space(model_space) and not is_image_space(given):
        raise ArgumentError(
            f"{NATURE_CNN_ASSERT.format(given)} (observation_space: a VecNormalize with norm_obs makes the images "
            f"float32, {given}; pass policy_kwargs=dict(normalize_images=False), as SB3 asks)"
        )


def check_squash_output(squash_output: bool, use_sde: bool) -> None:
    """SB3's ActorCriticPolicy asserts that `squash_output` comes with gSDE."""
    if squash_output and not use_sde:
        raise ArgumentError(
            _help(
                "squash_output=True is only available when using gSDE (use_sde=True)",
                "policy_kwargs.squash_output: expected False without use_sde=True, got True",
            )
        )


def check_shared_lstm(shared_lstm: bool, enable_critic_lstm: bool, share_features_extractor: bool) -> None:
    """sb3-contrib's RecurrentActorCriticPolicy asserts: a shared LSTM excludes the critic's own, and needs one
    features extractor."""
    if shared_lstm and enable_critic_lstm:
        raise ArgumentError(
            _help(
                "You must choose between shared LSTM, seperate or no LSTM for the critic.",
                "policy_kwargs.shared_lstm: expected False with enable_critic_lstm=True (the critic's LSTM is "
                "shared, its own, or none), got True",
            )
        )
    if shared_lstm and not share_features_extractor:
        raise ArgumentError(
            _help(
                "If the features extractor is not shared, the LSTM cannot be shared.",
                "policy_kwargs.shared_lstm: expected False with share_features_extractor=False, got True",
            )
        )


def check_recurrent_inputs(state: Any, episode_start: Any, rows: int, layers: int, units: int) -> None:
    """A recurrent `predict`'s `state` ((h, c), each [layers, rows, units]) and `episode_start` ([rows] flags), with
    torch's RuntimeError messages for them (`nn.LSTM`'s hidden-size check, `reshape` of the episode starts)."""
    if state is not None:
        expected = (layers, rows, units)
        parts = state if isinstance(state, (tuple, list)) else ()
        shapes = [tuple(np.shape(part)) for part in parts]
        if len(shapes) != 2 or any(shape != expected for shape in shapes):
            bad = next((s for s in shapes if s != expected), shapes[0] if shapes else ())
            raise TorchShapeError(
                _help(
                    f"Expected hidden[0] size {expected}, got {list(bad)}",
                    f"state: expected (h, c), each of shape [{layers}, {rows}, {units}] (n_lstm_layers, n_envs, "
                    f"lstm_hidden_size), got {shapes if shapes else type(state).__name__}",
                )
            )
    if episode_start is not None and np.size(episode_start) != rows:
        raise TorchShapeError(
            _help(
                f"shape '[{rows}, -1]' is invalid for input of size {np.size(episode_start)}",
                f"episode_start: expected one flag per observation, shape ({rows},), got {np.shape(episode_start)}",
            )
        )


def check_stats_window(stats_window_size: Any) -> None:
    """`stats_window_size` is the maxlen of the episode-statistics deques: an integer in 1..sys.maxsize (a C
    ssize_t), checked when the model is made, not at the first `learn` or at a save's load."""
    window = stats_window_size
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= sys.maxsize:
        raise ValueError(f"stats_window_size: expected an integer >= 1 (at most {sys.maxsize}), got {window!r}")


def check_batch_size(batch_size: Any, n_steps: int, n_envs: int, normalize_advantage: bool) -> None:
    """SB3's PPO asserts: `batch_size > 1` and `n_steps * n_envs > 1` when advantages are normalized (a one-row
    minibatch has no standard deviation: SB3's issue 440)."""
    if normalize_advantage and isinstance(batch_size, int) and not isinstance(batch_size, bool) and batch_size == 1:
        raise ArgumentError(
            _help(
                "`batch_size` must be greater than 1. See https://github.com/DLR-RM/stable-baselines3/issues/440",
                "batch_size: expected more than 1 with normalize_advantage=True, got 1",
            )
        )
    if normalize_advantage and n_steps * n_envs <= 1:
        raise ArgumentError(
            _help(
                f"`n_steps * n_envs` must be greater than 1. Currently n_steps={n_steps} and n_envs={n_envs}",
                f"n_steps * n_envs: expected more than 1 with normalize_advantage=True (advantage normalization), "
                f"got {n_steps * n_envs}",
            )
        )


def truncated_minibatch_warning(batch_size: int, n_steps: int, n_envs: int, count: int) -> None:
    """SB3's PPO warning (UserWarning, its text) for a `batch_size` that does not divide `n_steps * n_envs`, with
    what kppo does instead: `count` equal minibatches (kppo's minibatches have one size)."""
    rollout = n_steps * n_envs
    if rollout % batch_size == 0:
        return
    warnings.warn(
        f"You have specified a mini-batch size of {batch_size}, but because the `RolloutBuffer` is of size "
        f"`n_steps * n_envs = {rollout}`, after every {rollout // batch_size} untruncated mini-batches, there will "
        f"be a truncated mini-batch of size {rollout % batch_size}\n"
        f"We recommend using a `batch_size` that is a factor of `n_steps * n_envs`.\n"
        f"Info: (n_steps={n_steps} and n_envs={n_envs}) (kppo uses {count} equal minibatches of {rollout // count} "
        f"instead of a truncated one)",
        UserWarning,
        stacklevel=5,
    )


def _rows(observation: Any, space: spaces.Space) -> int:
    """How many observations `observation` holds (one, or a batch's length), once its shape is checked."""
    if isinstance(space, spaces.Dict):
        key = next(iter(space.spaces))
        shape, single = np.shape(observation[key]), tuple(space[key].shape or ())
    else:
        shape, single = np.shape(observation), tuple(space.shape or ())
    return 1 if shape == single or not shape else int(shape[0])


def check_predict(observation: Any, state: Any, episode_start: Any, space: spaces.Space, lstm: tuple | None) -> None:
    """`predict`'s inputs as SB3 checks them (`check_observation_shape`) and, for a recurrent policy with `lstm` =
    (n_lstm_layers, lstm_hidden_size), as sb3-contrib's torch layers do (`check_recurrent_inputs`)."""
    check_observation_shape(observation, space)
    if lstm is not None:
        try:
            rows = _rows(observation, space)
        except (TypeError, KeyError, ValueError):  # kppo's own one-line errors name what it is
            return
        check_recurrent_inputs(state, episode_start, rows, *lstm)


def policy_hint(policy: Any) -> str:
    """What a refused `policy` argument should be instead, for a class (SB3 takes its own policy classes and a
    user's torch `ActorCriticPolicy` subclass): kppo's networks are Keras, chosen by name, customized through
    policy_kwargs."""
    if not isinstance(policy, type):
        return ""
    return (
        f" (a policy class, {policy.__qualname__}: kppo's networks are Keras, named by the policy string; shape them "
        f"with policy_kwargs: net_arch, activation_fn, features_extractor_class=<a Keras layer, e.g. a "
        f"kppo.BaseFeaturesExtractor subclass>)"
    )
