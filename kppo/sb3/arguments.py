"""Stable-Baselines3 constructor arguments -> `kppo.Config` fields (the translation `kppo.PPO` applies once, with
one-line errors naming the argument); the table is in `kppo.sb3.ppo`'s docstring."""

from __future__ import annotations

import warnings
from typing import Any
from collections.abc import Callable

import gymnasium as gym
import keras

from kppo._tf import tf
from kppo.config.options import ACTIVATIONS, Config
from kppo.core.errors import ArgumentError, ArgumentTypeError, NotSupportedError

Schedule = Callable[[float], float]
#: What SB3's update computes differently from kppo's defaults: torch's Adam, the sample std of the advantages.
SB3_UPDATE: dict[str, Any] = {"adam_style": "torch", "advantage_std_ddof": 1}
IGNORED_POLICY_KWARGS = ("share_features_extractor", "normalize_images")


def split_schedule(value: float | Schedule, name: str) -> tuple[float, Schedule | None]:
    """(value at the start, the schedule or None)."""
    if callable(value):
        return float(value(1.0)), value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(f"{name}: expected a number or a schedule f(progress_remaining), got {value!r}")
    return float(value), None


def activation_name(activation: Any) -> str:
    name = activation if isinstance(activation, str) else getattr(activation, "__name__", None)
    if isinstance(activation, type) and issubclass(activation, keras.layers.Layer):
        name = activation.__name__.lower()
    if name not in ACTIVATIONS:
        raise ArgumentTypeError(
            f"policy_kwargs.activation_fn: expected a Keras activation or one of {ACTIVATIONS}, got {activation!r}"
        )
    return name


def net_arch_units(net_arch: Any) -> tuple[list[int], list[int]]:
    if isinstance(net_arch, dict):
        unknown = set(net_arch) - {"pi", "vf"}
        if unknown:
            raise ArgumentTypeError(f"policy_kwargs.net_arch: expected keys 'pi' and 'vf', got {sorted(net_arch)}")
        return list(net_arch.get("pi", [])), list(net_arch.get("vf", []))
    if isinstance(net_arch, (list, tuple)) and all(isinstance(u, int) for u in net_arch):
        return list(net_arch), list(net_arch)
    raise ArgumentTypeError(
        f"policy_kwargs.net_arch: expected a list of ints or dict(pi=[...], vf=[...]), got {net_arch!r}"
    )


def policy_config(policy_kwargs: dict | None) -> dict[str, Any]:
    """SB3 policy_kwargs -> Config fields."""
    kwargs = dict(policy_kwargs or {})
    out: dict[str, Any] = {}
    pi, vf = net_arch_units(kwargs.pop("net_arch", [64, 64]))
    if not pi or not vf:
        raise ValueError("policy_kwargs.net_arch: kppo needs at least one hidden layer in each of pi and vf")
    out["actor_hidden_units"], out["critic_hidden_units"] = pi, vf
    out["activation"] = activation_name(kwargs.pop("activation_fn", "tanh"))
    ortho_init = kwargs.pop("ortho_init", True)
    out["kernel_init"] = "orthogonal" if ortho_init else "torch_default"
    out["bias_init"] = "zeros" if ortho_init else "torch_default"  # SB3 zeroes biases only in its orthogonal init
    out["log_std_init"] = float(kwargs.pop("log_std_init", 0.0))
    out["squash"] = bool(kwargs.pop("squash_output", False))
    out["box_actions"] = "rescale" if out["squash"] else "clip"  # SB3: unscale a squashed action, else clip it
    out["full_std"] = bool(kwargs.pop("full_std", True))
    if kwargs.pop("use_expln", False):
        raise NotSupportedError("policy_kwargs.use_expln: expected False (kppo's gSDE uses exp(log_std)), got True")
    if kwargs.pop("clip_mean", 2.0) != 2.0:
        raise ArgumentTypeError("policy_kwargs.clip_mean: only used by SB3's SAC; PPO does not take it")
    for key in IGNORED_POLICY_KWARGS:
        kwargs.pop(key, None)
    if kwargs:
        raise ArgumentTypeError(
            f"policy_kwargs: unsupported key(s) {sorted(kwargs)} (supported: net_arch, activation_fn, "
            f"ortho_init, log_std_init, squash_output, full_std, use_expln, "
            f"{', '.join(IGNORED_POLICY_KWARGS)})"
        )
    return out


def tf_device(device: str) -> str | None:
    if device == "auto":
        return None
    if device == "cpu":
        return "/CPU:0"
    if device in ("gpu", "cuda") or device.startswith(("cuda:", "gpu:")):
        index = device.split(":")[1] if ":" in device else "0"
        if not tf.config.list_physical_devices("GPU"):
            raise ValueError(f"device: expected an available GPU for {device!r}, but TensorFlow sees none")
        return f"/GPU:{index}"
    raise ValueError(f"device: expected 'auto', 'cpu', 'gpu' or 'cuda[:N]', got {device!r}")


def jsonable_policy_kwargs(kwargs: dict) -> dict:
    """policy_kwargs with callables replaced by their names (activation functions)."""
    return {k: (activation_name(v) if k == "activation_fn" else v) for k, v in kwargs.items()}


def minibatches(batch_size: Any, rollout: int) -> int:
    """SB3's `batch_size` (minibatch size) -> kppo's number of equal minibatches of a rollout of `rollout` steps;
    warns, as SB3, when it does not divide the rollout."""
    if rollout <= 1:
        raise ArgumentError(f"n_steps * n_envs: expected more than 1 (advantage normalization), got {rollout}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ArgumentError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
    num_minibatches = max(1, rollout // batch_size)
    if rollout % batch_size:
        while rollout % num_minibatches:  # kppo's minibatches have equal sizes
            num_minibatches += 1
        warnings.warn(
            f"You have specified a mini-batch size of {batch_size}, but because the rollout is of size "
            f"n_steps * n_envs = {rollout}, kppo uses {num_minibatches} equal minibatches of "
            f"{rollout // num_minibatches} (SB3 would add a truncated mini-batch of {rollout % batch_size})."
        )
    return num_minibatches


def sb3_config(
    args: dict[str, Any],
    n_envs: int,
    action_space: gym.spaces.Space,
    normalize: tuple[bool, bool],
    policy_fields: dict[str, Any],
) -> Config:
    """The Config of `kppo.PPO`: its constructor arguments `args` (starting values of schedules), the env's
    `n_envs` and action space, VecNormalize's (norm_obs, norm_reward) and `policy_config`'s fields; SB3's update
    (`SB3_UPDATE`)."""
    if args["use_sde"] and not isinstance(action_space, gym.spaces.Box):
        raise ValueError(
            f"use_sde: generalized State-Dependent Exploration needs a Box action space, got {action_space}"
        )
    rollout = args["n_steps"] * n_envs
    return Config(
        env="custom",
        env_backend="gymnasium",
        num_envs=n_envs,
        num_steps=args["n_steps"],
        total_timesteps=rollout,
        eval_freq=1,
        learning_rate=args["learning_rate"],
        lr_schedule="constant",
        num_epochs=args["n_epochs"],
        num_minibatches=minibatches(args["batch_size"], rollout),
        gamma=args["gamma"],
        gae_lambda=args["gae_lambda"],
        clip_range=args["clip_range"],
        clip_range_vf=args["clip_range_vf"],
        vf_clip_mode="clipped",
        normalize_advantage=args["normalize_advantage"],
        ent_coef=args["ent_coef"],
        vf_coef=args["vf_coef"],
        max_grad_norm=args["max_grad_norm"],
        target_kl=args["target_kl"],
        verbose=min(args["verbose"], 2),
        seed=args["seed"],
        use_sde=args["use_sde"],
        sde_sample_freq=args["sde_sample_freq"] if args["sde_sample_freq"] > 0 else -1,
        normalize_obs=normalize[0],
        normalize_reward=normalize[1],
        **policy_fields,
        **SB3_UPDATE,
    )
