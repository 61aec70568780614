"""Checking exported artifacts against the policy: the observations and action masks an artifact is checked on
(`parity_observations`, `parity_masks`, `calibration_observations` for int8), the parity measure (`measure_parity`,
`measure_recurrent_parity`: episodes, state carried) and its check (`check_parity`). Running them is
`kppo.exporter.runner`."""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np

from kppo._tf import tf
from kppo.agent.policy import Policy
from kppo.gym_envs.spaces import is_image_space, space_shape

PARITY_TOLERANCE = 1e-5  # float32 artifacts: max |error| / (high - low) for Box actions


class ParityError(ValueError):
    """The artifact does not reproduce `Policy.get_action`."""


def random_images(shape: tuple[int, ...], count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` uint8 images [count, *shape] for checks: a third uniform noise, a third sparse (each pixel 0 or 255,
    MinAtar-like), a third blocks of 4x4-pixel noise (edges and flat areas, as in rendered frames)."""
    images = rng.integers(0, 256, size=(count, *shape), dtype=np.uint8)
    sparse = (rng.random((count, *shape)) < rng.uniform(0.02, 0.3, size=(count,) + (1,) * len(shape))) * 255
    blocks = rng.integers(0, 256, size=(count, *[-(-d // 4) for d in shape]), dtype=np.uint8)
    for axis in range(1, blocks.ndim):
        blocks = np.repeat(blocks, 4, axis=axis)
    blocks = blocks[(slice(None), *[slice(0, d) for d in shape])]
    kind = np.arange(count) % 3
    return np.where(
        (kind == 1).reshape(-1, *[1] * len(shape)),
        sparse,
        np.where((kind == 2).reshape(-1, *[1] * len(shape)), blocks, images),
    ).astype(np.uint8)


def _sample_rows(policy: Policy, z: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Input rows from standard scores z [N, input_dim]: Box values mean + std * z (normalization statistics),
    Discrete / MultiDiscrete / MultiBinary values uniform over their range, a Dict's images `random_images`."""
    mean = np.asarray(policy.obs_scaling.mean, np.float64)
    std = np.sqrt(np.asarray(policy.obs_scaling.var, np.float64) + policy.obs_scaling.epsilon)
    rows = np.zeros(z.shape)
    space = policy.observation_space
    for part in policy.layout:
        sub = space if part.key is None else space[part.key]  # type: ignore[index]
        if is_image_space(sub):
            rows[:, part.raw] = random_images(space_shape(sub), len(z), rng).reshape(len(z), -1)
        elif part.kind == "Box":
            rows[:, part.raw] = mean[part.encoded] + std[part.encoded] * z[:, part.raw]
        else:
            sizes = np.asarray(part.sizes or [2] * (part.raw.stop - part.raw.start))
            rows[:, part.raw] = np.asarray(part.starts or 0) + rng.integers(0, sizes, size=(len(z), len(sizes)))
    return rows.astype(policy.input_dtype)


def parity_observations(policy: Policy, count: int, seed: int = 0, recorded: np.ndarray | None = None) -> np.ndarray:
    """Input rows to check an artifact on: recorded ones first, then samples around the normalization statistics
    (70% within 3 std, 30% at 10-15 std, i.e. in the +-10 clip region; integers uniform), [count, input_dim]; for an
    image policy `random_images` after the recorded ones, [count, *input_shape] uint8."""
    rng = np.random.default_rng(seed)
    dim = policy.input_dim
    shape = policy.input_shape
    parts = [] if recorded is None else [np.asarray(recorded).astype(policy.input_dtype).reshape(-1, *shape)[:count]]
    missing = count - sum(len(p) for p in parts)
    if missing > 0 and policy.image:
        parts.append(random_images(shape, missing, rng))
    elif missing > 0:
        near = rng.normal(size=(missing, dim)) * 3.0
        far = rng.choice([-1.0, 1.0], size=(missing, dim)) * rng.uniform(10.0, 15.0, size=(missing, dim))
        parts.append(_sample_rows(policy, np.where(rng.random((missing, 1)) < 0.7, near, far), rng))
    return np.concatenate(parts)


def calibration_observations(policy: Policy, recorded: np.ndarray | None, seed: int) -> np.ndarray:
    """int8 calibration data without recorded observations or an env: samples within the normalization statistics'
    bulk (mean +- std * N(0, 1)); the far, clipped samples of the parity set would waste the int8 input range. An
    image policy's: the recorded images (else `random_images`), one pixel of the first set to 0 and one to 255, so
    the calibrated input range is the bytes' whole range [0, 255] (every byte an exact int8 level, none clipped),
    at the cost of two pixels in one image (a black and a white frame would widen every activation's range)."""
    if policy.image:
        rng = np.random.default_rng(seed + 1)
        images = random_images(policy.input_shape, 500, rng) if recorded is None else np.asarray(recorded)
        images = images.astype(np.uint8).reshape(-1, *policy.input_shape).copy()
        first = images[0].reshape(-1)  # a view: writes go into the first image
        first[0], first[-1] = 0, 255
        return images
    if recorded is not None:
        return np.asarray(recorded).astype(policy.input_dtype).reshape(-1, policy.input_dim)
    rng = np.random.default_rng(seed + 1)
    return _sample_rows(policy, rng.normal(size=(500, policy.input_dim)), rng)


def mask_parts(policy: Policy) -> list[int]:
    """The widths of the policy's mask parts: [n] for Discrete(n), nvec for MultiDiscrete."""
    space = policy.action_space
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [int(n) for n in space.nvec]
    return [int(cast(gym.spaces.Discrete, space).n)]


def example_masks(sizes: list[int], count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` random masks [count, sum(sizes)] float32 0/1: each action allowed with probability 1/2, one at least
    per part."""
    masks = rng.random((count, int(sum(sizes)))) < 0.5
    for start, size in zip(np.cumsum([0, *sizes[:-1]]), sizes):
        masks[np.arange(count), start + rng.integers(0, size, count)] = True
    return masks.astype(np.float32)


def parity_masks(policy: Policy, count: int, seed: int = 0) -> np.ndarray | None:
    """Random action masks [count, mask_size] for a masked policy (`example_masks`), None for others."""
    if not policy.action_masks:
        return None
    return example_masks(mask_parts(policy), count, np.random.default_rng(seed + 2)).astype(bool)


def measure_parity(run, policy: Policy, obs: np.ndarray, masks: np.ndarray | None = None) -> dict[str, float]:
    """Artifact vs `Policy.get_action` on `obs` (with `masks` for a masked artifact): for Box actions the error
    relative to the action range; for discrete actions the fraction of differing actions among observations whose
    top two allowed logits differ by > 1e-4."""
    flat = policy.encode(obs)
    want = policy.get_action_flat(flat, None, masks)
    got = np.asarray(run(obs) if masks is None else run(obs, masks)).reshape(want.shape)
    logits = None
    if not isinstance(policy.action_space, gym.spaces.Box):
        logits = policy.dist.masked_np(np.asarray(policy.actor(tf.constant(np.asarray(policy.normalize(flat))))), masks)
    return _compare(policy, want, got, logits)


def _compare(policy: Policy, want: np.ndarray, got: np.ndarray, logits: np.ndarray | None) -> dict[str, float]:
    """The parity figures of actions `got` against `want` (see `measure_parity`); `logits`: the policy's (masked)
    logits at each row, for discrete actions."""
    if not np.all(np.isfinite(got)):
        return {"max_error": float("inf"), "mean_error": float("inf"), "non_finite": float(np.mean(~np.isfinite(got)))}
    space = policy.action_space
    if isinstance(space, gym.spaces.Box):
        err = np.abs(got.astype(np.float64) - want) / (space.high - space.low)
        return {"max_error": float(err.max()), "mean_error": float(err.mean()), "non_finite": 0.0}
    assert logits is not None  # given for discrete actions
    top2 = np.sort(logits, axis=-1)[..., -2:]
    decisive = (top2[..., 1] - top2[..., 0] > 1e-4).reshape(len(want), -1).all(axis=1)
    wrong = (got != want).reshape(len(want), -1).any(axis=1)
    rate = float(np.mean(wrong[decisive])) if decisive.any() else 0.0
    return {"max_error": rate, "mean_error": float(np.mean(wrong)), "non_finite": 0.0}


def recurrent_states(policy: Policy, rows: np.ndarray, episode_length: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """(h, c) [N, layers * units]: the state a recurrent policy holds before each of `rows` [N, input_dim], played in
    order as episodes of `episode_length` steps from zeros (what int8 calibration of its state inputs sees)."""
    units, states = policy.lstm.state_size, []
    h = c = np.zeros((1, units), np.float32)
    for i, row in enumerate(np.asarray(rows)):
        if i % episode_length == 0:
            h = c = np.zeros((1, units), np.float32)
        states.append((h, c))
        _, h, c, _ = policy.step_flat(policy.encode(row[None]), h, c, np.zeros(1, bool))
    return cast(tuple[np.ndarray, np.ndarray], tuple(np.concatenate(part) for part in zip(*states)))


def measure_recurrent_parity(
    run, policy: Policy, obs: np.ndarray, masks: np.ndarray | None = None, episode_length: int = 50
) -> dict[str, float]:
    """`measure_parity` for a recurrent artifact (`run(obs, h, c, masks) -> (actions, h, c)`): the rows of `obs` cut
    into episodes of `episode_length` steps, run side by side, the state carried from zeros at each episode's start
    (`Policy.step_flat`); also the state's largest absolute difference (`state_max_error`)."""
    episodes, obs = len(obs) // episode_length, np.asarray(obs)
    rows = obs[: episodes * episode_length].reshape(episodes, episode_length, *obs.shape[1:])  # images keep theirs
    mask_rows = (
        None if masks is None else np.asarray(masks)[: episodes * episode_length].reshape(episodes, episode_length, -1)
    )
    h = c = np.zeros((episodes, policy.lstm.state_size), np.float32)
    run_h, run_c = h, c
    want: list[np.ndarray] = []
    got: list[np.ndarray] = []
    logits: list[Any] = []
    state_error = 0.0
    for t in range(episode_length):
        step_mask = None if mask_rows is None else mask_rows[:, t]
        action, h, c, params = policy.step_flat(
            policy.encode(rows[:, t]), h, c, np.zeros(episodes, bool), None, step_mask
        )
        run_action, run_h, run_c = run(rows[:, t], run_h, run_c, step_mask)
        state_error = max(state_error, float(np.abs(run_h - h).max()), float(np.abs(run_c - c).max()))
        want.append(action)
        got.append(np.asarray(run_action).reshape(action.shape))
        logits.append(params)
    want_all, got_all = np.concatenate(want), np.concatenate(got)
    return {
        **_compare(policy, want_all, got_all, np.concatenate(logits) if not isinstance(logits[0], tuple) else None),
        "state_max_error": state_error,
    }


def check_parity(parity: dict[str, float], format: str = "tflite") -> None:
    """Raises `ParityError` unless a float32 artifact matched the policy (see `measure_parity`)."""
    if parity["non_finite"] or parity["max_error"] > PARITY_TOLERANCE:
        raise ParityError(
            f"export: the {format} artifact does not reproduce Policy.get_action (max error {parity['max_error']:.3g},"
            f" non-finite {parity['non_finite']:.0%}, tolerance {PARITY_TOLERANCE}); did its weights load?"
        )
