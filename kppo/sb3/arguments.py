"""Stable-Baselines3 constructor arguments -> `kppo.Config` fields (the translation `kppo.PPO` applies once, with
one-line errors naming the argument); the table is in `kppo.sb3.ppo`'s docstring."""

from __future__ import annotations

import warnings
from typing import Any
from collections.abc import Callable

import gymnasium as gym
import keras
import numpy as np

from kppo._tf import tf
from kppo.agent.extractors import CombinedExtractor, FlattenExtractor, NatureCNN, SmallCNN, extractor_factory
from kppo.config.options import ACTIVATIONS, Config
from kppo.config.sb3_defaults import SB3_SEMANTICS
from kppo.config.spellings import minibatch_count
from kppo.core.errors import ArgumentError, ArgumentTypeError, NotSupportedError, sorted_keys
from kppo.gym_envs.spaces import has_image
from kppo.sb3.contracts import check_batch_size, check_squash_output, truncated_minibatch_warning

Schedule = Callable[[float], float]


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


#: SB3's warning for the list format of net_arch (stable_baselines3/common/policies.py, ActorCriticPolicy), which it
#: then reads as its first element.
NET_ARCH_LIST_WARNING = (
    "As shared layers in the mlp_extractor are removed since SB3 v1.8.0, you should now pass directly a dictionary "
    "and not a list (net_arch=dict(pi=..., vf=...) instead of net_arch=[dict(pi=..., vf=...)])"
)
#: SB3's net_arch when none is given (ActorCriticPolicy with an MLP features extractor).
DEFAULT_NET_ARCH = ([64, 64], [64, 64])


def _widths(value: Any, name: str) -> list[int]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(u, int) and not isinstance(u, bool) and u >= 1 for u in value
    ):
        raise ArgumentTypeError(f"policy_kwargs.net_arch{name}: expected a list of positive ints, got {value!r}")
    return [int(u) for u in value]


def net_arch_units(net_arch: Any) -> tuple[list[int], list[int]]:
    """SB3's `net_arch` -> (actor widths, critic widths), as SB3 >= 1.8 reads it: None is SB3's default
    (pi=[64, 64], vf=[64, 64]); a list of ints is the same widths for both (separate networks); dict(pi=..., vf=...)
    each its own, a missing or empty list no hidden layer (the head on the features); the old list format
    [dict(pi=..., vf=...)] warns as SB3 and is read as its dict. Shared layers ([64, dict(...)]) were removed in SB3
    1.8 (SB3 fails on them with a TypeError): `ArgumentTypeError`."""
    if isinstance(net_arch, (list, tuple)) and net_arch and isinstance(net_arch[0], dict):
        warnings.warn(NET_ARCH_LIST_WARNING, UserWarning, stacklevel=4)
        net_arch = net_arch[0]
    if net_arch is None:
        return list(DEFAULT_NET_ARCH[0]), list(DEFAULT_NET_ARCH[1])
    if isinstance(net_arch, dict):
        unknown = set(net_arch) - {"pi", "vf"}
        if unknown:
            raise ArgumentTypeError(f"policy_kwargs.net_arch: expected keys 'pi' and 'vf', got {sorted_keys(net_arch)}")
        return _widths(net_arch.get("pi", []), "['pi']"), _widths(net_arch.get("vf", []), "['vf']")
    if isinstance(net_arch, (list, tuple)) and any(isinstance(u, dict) for u in net_arch):
        raise ArgumentTypeError(
            f"policy_kwargs.net_arch: expected a list of ints or dict(pi=[...], vf=[...]), got {net_arch!r} (shared "
            f"layers before a dict were removed in SB3 1.8.0)"
        )
    if isinstance(net_arch, (list, tuple)):
        widths = _widths(net_arch, "")
        return widths, list(widths)
    raise ArgumentTypeError(
        f"policy_kwargs.net_arch: expected a list of ints or dict(pi=[...], vf=[...]), got {net_arch!r}"
    )


# ---------------------------------------------------------------------------------------------------------------
# optimizer_class / optimizer_kwargs: torch's optimizers named by module and qualname (torch is never imported)
# ---------------------------------------------------------------------------------------------------------------

#: The RMSprops' torch kwargs -> Config fields (torch's, SB3's RMSpropTFLike and kppo's).
_RMSPROP_FIELDS = {
    "alpha": "rmsprop_alpha",
    "eps": "optimizer_eps",
    "weight_decay": "weight_decay",
    "momentum": "optimizer_momentum",
    "centered": "rmsprop_centered",
}
#: torch optimizer classes -> (`Config.optimizer`, {torch kwarg: Config field}); the math is in kppo.core.optimizers.
TORCH_OPTIMIZERS: dict[str, tuple[str, dict[str, str]]] = {
    "torch.optim.adam.Adam": ("adam", {"eps": "optimizer_eps", "weight_decay": "weight_decay"}),
    "torch.optim.adamw.AdamW": ("adamw", {"eps": "optimizer_eps", "weight_decay": "weight_decay"}),
    "torch.optim.rmsprop.RMSprop": ("rmsprop", _RMSPROP_FIELDS),
    "stable_baselines3.common.sb2_compat.rmsprop_tf_like.RMSpropTFLike": ("rmsprop_tf", _RMSPROP_FIELDS),
    "kppo.core.optimizers.RMSpropTFLike": ("rmsprop_tf", _RMSPROP_FIELDS),
    "torch.optim.sgd.SGD": (
        "sgd",
        {
            "momentum": "optimizer_momentum",
            "dampening": "sgd_dampening",
            "weight_decay": "weight_decay",
            "nesterov": "sgd_nesterov",
        },
    ),
}
#: torch's defaults where kppo's Config defaults differ (eps 1e-8: SB3 sets 1e-5 only for Adam without kwargs).
TORCH_DEFAULTS = {"optimizer_eps": 1e-8}
#: torch's defaults of one optimizer beyond TORCH_DEFAULTS (AdamW decays by 0.01 unless told otherwise).
TORCH_CLASS_DEFAULTS = {"adamw": {"weight_decay": 0.01}}
#: Keyword arguments of each that change how torch computes, not what: accepted, without effect.
TORCH_PERFORMANCE_FLAGS = {
    "adam": ("foreach", "fused", "capturable", "differentiable"),
    "adamw": ("foreach", "fused", "capturable", "differentiable"),
    "rmsprop": ("foreach", "capturable", "differentiable"),
    "sgd": ("foreach", "fused", "differentiable"),
}
#: Keyword arguments of each accepted only at their torch default (kppo does not build the other value).
TORCH_ONLY_DEFAULT = {
    "adam": {"amsgrad": False, "maximize": False, "decoupled_weight_decay": False},
    "adamw": {"amsgrad": False, "maximize": False},
    "rmsprop": {"maximize": False},
    "sgd": {"maximize": False},
}


def class_path(cls: Any) -> str:
    """'module.qualname' of a class (torch's optimizers: 'torch.optim.adam.Adam')."""
    return f"{getattr(cls, '__module__', '')}.{getattr(cls, '__qualname__', repr(cls))}"


def is_torch_module_class(cls: Any) -> bool:
    """True for a subclass of torch.nn.Module, recognized by its classes' module names (torch is not imported)."""
    return isinstance(cls, type) and any(class_path(base) == "torch.nn.modules.module.Module" for base in cls.__mro__)


def optimizer_config(optimizer_class: Any, optimizer_kwargs: dict | None) -> dict[str, Any]:
    """SB3's `optimizer_class` and `optimizer_kwargs` -> Config fields. As SB3's ActorCriticPolicy: Adam without
    kwargs gets eps=1e-5; given kwargs (even {}) start from torch's defaults (eps=1e-8). `lr` is SB3's own argument
    (`learning_rate`): in optimizer_kwargs it is a TypeError in SB3 too. Betas are Adam's (beta_1, beta_2)."""
    path = optimizer_class if isinstance(optimizer_class, str) else class_path(optimizer_class)
    if path not in TORCH_OPTIMIZERS:
        raise ArgumentTypeError(
            f"policy_kwargs.optimizer_class: expected torch.optim.Adam, AdamW, RMSprop, SGD or (SB3's or kppo's) "
            f"RMSpropTFLike (Keras optimizers with their semantics are built for those), got {path}"
        )
    name, fields = TORCH_OPTIMIZERS[path]
    out: dict[str, Any] = {"optimizer": name}
    if optimizer_kwargs is None and name == "adam":
        return out
    out.update(TORCH_DEFAULTS, **TORCH_CLASS_DEFAULTS.get(name, {}))
    if optimizer_kwargs is None:
        return out
    for key, value in dict(optimizer_kwargs).items():
        if key in fields:
            out[fields[key]] = value
        elif key == "betas" and name in ("adam", "adamw"):
            out["adam_beta_1"], out["adam_beta_2"] = (float(b) for b in value)
        elif key in TORCH_ONLY_DEFAULT.get(name, {}):
            if bool(value) != TORCH_ONLY_DEFAULT[name][key]:
                raise NotSupportedError(
                    f"policy_kwargs.optimizer_kwargs.{key}: expected {TORCH_ONLY_DEFAULT[name][key]} (kppo does not "
                    f"build it), got {value!r}"
                )
        elif key not in TORCH_PERFORMANCE_FLAGS.get(name, ()):
            raise ArgumentTypeError(
                f"policy_kwargs.optimizer_kwargs: {path} takes no {key!r} here (kppo reads: "
                f"{', '.join([*fields, *(['betas'] if name in ('adam', 'adamw') else [])])})"
            )
    return out


#: kppo's extractors SB3 users name as `features_extractor_class` (SB3's own classes are torch modules), by the
#: `Config.features_extractor` value each is.
BUILTIN_EXTRACTORS = {
    NatureCNN: "nature_cnn",
    SmallCNN: "small_cnn",
    CombinedExtractor: "combined",
    FlattenExtractor: "flatten",
}
#: The extractor each SB3 policy name uses when policy_kwargs name none ("cnn": NatureCNN, or SmallCNN under 36 px).
POLICY_EXTRACTORS = {
    "CnnPolicy": "cnn",
    "MultiInputPolicy": "combined",
    "MlpPolicy": "flatten",
    "CnnLstmPolicy": "cnn",
    "MultiInputLstmPolicy": "combined",
    "MlpLstmPolicy": "flatten",
}


def check_extractor_class(extractor_class: Any) -> None:
    """One-line `ArgumentTypeError` unless `extractor_class` is a Keras layer class (a torch module class is named
    as such: kppo's networks are Keras)."""
    if is_torch_module_class(extractor_class):
        raise ArgumentTypeError(
            f"policy_kwargs.features_extractor_class: expected a Keras layer class (kppo's networks are Keras: "
            f"derive it from kppo.BaseFeaturesExtractor, layers in __init__, the forward pass in forward), got the "
            f"torch module {class_path(extractor_class)}"
        )
    if not (isinstance(extractor_class, type) and issubclass(extractor_class, keras.layers.Layer)):
        raise ArgumentTypeError(
            f"policy_kwargs.features_extractor_class: expected a Keras layer class, got {extractor_class!r}"
        )


def extractor_fields(policy: str, kwargs: dict, observation_space: gym.spaces.Space | None) -> dict[str, Any]:
    """The Config fields of SB3's extractor options (popped from `kwargs`) for `policy` ("CnnPolicy", ...): the
    built-in extractor named (or the policy's default; "combined" only when the Dict holds images, else the
    observations are flat already), its features_dim, normalize_images, share_features_extractor. A user's Keras
    class stays in `kwargs` (`user_extractor`)."""
    out: dict[str, Any] = {
        "normalize_images": bool_kwarg(kwargs, "normalize_images", True),
        "share_features_extractor": bool_kwarg(kwargs, "share_features_extractor", True),
    }
    extractor_class = kwargs.get("features_extractor_class")
    extractor_kwargs = dict(kwargs.get("features_extractor_kwargs") or {})
    if extractor_class is None:  # SB3 gives features_extractor_kwargs to the policy's default extractor
        nominal = POLICY_EXTRACTORS.get(policy, "flatten")
        name = nominal
        if name == "combined" and (observation_space is None or not has_image(observation_space)):
            name = "flatten"
        label = f"{policy}'s default extractor"
    elif extractor_class in BUILTIN_EXTRACTORS:
        nominal = name = BUILTIN_EXTRACTORS[extractor_class]
        label = extractor_class.__name__
    else:
        check_extractor_class(extractor_class)
        return out
    size_key = {"combined": "cnn_output_dim", "flatten": None}.get(nominal, "features_dim")
    size = extractor_kwargs.pop(size_key, None) if size_key else None
    if extractor_kwargs:
        takes = f"takes {size_key} here" if size_key else "takes no arguments"
        raise ArgumentTypeError(
            f"policy_kwargs.features_extractor_kwargs: {label} {takes}, got {sorted_keys(extractor_kwargs)}"
        )
    out["features_dim"] = None if size is None or name == "flatten" else int(size)  # a flat Dict: CNN size unused
    kwargs.pop("features_extractor_class", None)
    kwargs.pop("features_extractor_kwargs", None)
    out["features_extractor"] = name
    return out


def saved_extractor(policy_kwargs: dict, custom_objects: dict) -> dict:
    """Saved policy_kwargs with a user's `features_extractor_class` (saved as its 'module.qualname') given back by
    `custom_objects["features_extractor_class"]` (SB3's `load(custom_objects=...)`; nothing is imported by name)."""
    name = policy_kwargs.get("features_extractor_class")
    if not isinstance(name, str):
        return policy_kwargs
    given = custom_objects.get("features_extractor_class")
    if given is None or class_path(given) != name:
        raise ArgumentTypeError(
            f"custom_objects: expected {{'features_extractor_class': {name.rsplit('.', 1)[-1]}}} (the model was saved "
            f"with the Keras layer {name!r}, which kppo does not import by name), got {given!r}"
        )
    return {**policy_kwargs, "features_extractor_class": given}


def user_extractor(kwargs: dict) -> tuple[type | None, dict]:
    """(a user's Keras `features_extractor_class`, its kwargs), popped from `kwargs`; (None, {}) without one or for
    kppo's own classes, which a Config names (`extractor_fields`)."""
    extractor_class = kwargs.pop("features_extractor_class", None)
    extractor_kwargs = dict(kwargs.pop("features_extractor_kwargs", None) or {})
    if extractor_class is None or extractor_class in BUILTIN_EXTRACTORS:
        return None, {}
    return extractor_class, extractor_kwargs


def network_fields(
    policy: str, policy_fields: dict, policy_kwargs: dict, observation_space: gym.spaces.Space
) -> dict[str, Any]:
    """`policy_fields` (`policy_config`'s) and the features extractor's fields for `observation_space`; SB3's
    CnnPolicy puts its heads on the CNN's features (`net_arch=[]`) unless policy_kwargs give a net_arch, and
    sb3-contrib's CnnLstmPolicy on its LSTMs' outputs."""
    fields = dict(policy_fields)
    fields.update(extractor_fields(policy, dict(policy_kwargs), observation_space))
    if policy in ("CnnPolicy", "CnnLstmPolicy") and policy_kwargs.get("net_arch") is None:
        fields["actor_hidden_units"] = fields["critic_hidden_units"] = ()
    if user_extractor(dict(policy_kwargs))[0] is not None:
        # a user's layer may convolve, and XLA:CPU's convolution gradients are far slower than TensorFlow's graph
        # kernels (docs/benchmarks/images.md, "XLA and the update")
        fields["jit_update"] = False
    return fields


def user_extractor_factory(policy_kwargs: dict, config: Config, observation_space: gym.spaces.Space) -> Any:
    """The factory of a user's Keras `features_extractor_class` in `policy_kwargs` (a Config names only kppo's);
    None without one."""
    extractor_class, kwargs = user_extractor(dict(policy_kwargs))
    if extractor_class is None:
        return None
    init = (config.normalize_images, config.kernel_init, config.bias_init, config.seed)
    return extractor_factory(extractor_class, observation_space, kwargs, *init)


def policy_config(policy_kwargs: dict | None) -> dict[str, Any]:
    """SB3 policy_kwargs -> Config fields."""
    kwargs = dict(policy_kwargs or {})
    out: dict[str, Any] = {}
    out["actor_hidden_units"], out["critic_hidden_units"] = net_arch_units(kwargs.pop("net_arch", None))
    out["activation"] = activation_name(kwargs.pop("activation_fn", "tanh"))
    ortho_init = bool_kwarg(kwargs, "ortho_init", True)
    out["kernel_init"] = "orthogonal" if ortho_init else "torch_default"
    out["bias_init"] = "zeros" if ortho_init else "torch_default"  # SB3 zeroes biases only in its orthogonal init
    out["log_std_init"] = number_kwarg(kwargs, "log_std_init", 0.0, float)
    out["squash"] = bool_kwarg(kwargs, "squash_output", False)
    out["box_actions"] = "rescale" if out["squash"] else "clip"  # SB3: unscale a squashed action, else clip it
    out["full_std"] = bool_kwarg(kwargs, "full_std", True)
    out["use_expln"] = bool_kwarg(kwargs, "use_expln", False)
    if kwargs.pop("clip_mean", 2.0) != 2.0:
        raise ArgumentTypeError("policy_kwargs.clip_mean: only used by SB3's SAC; PPO does not take it")
    if "optimizer_class" in kwargs or "optimizer_kwargs" in kwargs:
        adam = "torch.optim.adam.Adam"
        out.update(optimizer_config(kwargs.pop("optimizer_class", adam), kwargs.pop("optimizer_kwargs", None)))
    for key in (
        "features_extractor_class",
        "features_extractor_kwargs",
        "normalize_images",
        "share_features_extractor",
    ):
        kwargs.pop(key, None)  # `extractor_fields` reads them
    if kwargs:
        raise ArgumentTypeError(
            f"policy_kwargs: unsupported key(s) {sorted_keys(kwargs)} (supported: net_arch, activation_fn, "
            f"ortho_init, log_std_init, squash_output, full_std, use_expln, optimizer_class, optimizer_kwargs, "
            f"features_extractor_class, features_extractor_kwargs, normalize_images, share_features_extractor)"
        )
    return out


def number_kwarg(kwargs: dict, key: str, default: Any, kind: type) -> Any:
    """`kind(kwargs.pop(key, default))`; a value that is not a number is an ArgumentTypeError naming
    `policy_kwargs.<key>` (torch's constructors refuse it with a TypeError)."""
    value = kwargs.pop(key, default)
    try:
        if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, np.number)):
            raise TypeError(value)
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentTypeError(f"policy_kwargs.{key}: expected a number, got {value!r}") from None


def bool_kwarg(kwargs: dict, key: str, default: bool) -> bool:
    """`kwargs.pop(key, default)` as a bool: True, False, numpy's bools, or the integers 0 and 1; anything else (the
    string 'no' is truthy to Python) is an ArgumentTypeError naming `policy_kwargs.<key>`."""
    value = kwargs.pop(key, default)
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise ArgumentTypeError(f"policy_kwargs.{key}: expected True or False, got {value!r}")


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

    def jsonable(key: str, value: Any) -> Any:
        if key == "activation_fn":
            return activation_name(value)
        return class_path(value) if key == "features_extractor_class" else value

    return {k: jsonable(k, v) for k, v in kwargs.items()}


def minibatches(batch_size: Any, rollout: int, normalize_advantage: bool = True, n_envs: int = 1) -> int:
    """SB3's `batch_size` (minibatch size) -> kppo's number of equal minibatches of a rollout of `rollout` steps
    over `n_envs` envs (`config.spellings.minibatch_count`, the rule a Config's `batch_size` follows too). SB3's
    asserts (`batch_size > 1` and `n_steps * n_envs > 1` with advantage normalization) and its UserWarning for a
    `batch_size` that does not divide the rollout come with SB3's messages (`kppo.sb3.contracts`)."""
    check_batch_size(batch_size, rollout // max(n_envs, 1), n_envs, normalize_advantage)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ArgumentError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
    with warnings.catch_warnings():  # SB3's own warning below says it, with what kppo does
        warnings.simplefilter("ignore", UserWarning)
        count = minibatch_count(batch_size, rollout)
    truncated_minibatch_warning(batch_size, rollout // max(n_envs, 1), n_envs, count)
    return count


def sb3_config(
    args: dict[str, Any],
    n_envs: int,
    action_space: gym.spaces.Space,
    normalize: dict[str, Any],
    policy_fields: dict[str, Any],
) -> Config:
    """The Config of `kppo.PPO`: its constructor arguments `args` (starting values of schedules), the env's
    `n_envs` and action space, VecNormalize's settings (`normalize`: normalize_obs, normalize_reward,
    normalize_obs_keys and its constants, `VecNormalize.config_fields`) and `policy_config`'s fields; SB3's update
    and semantics (`kppo.config.sb3_defaults.SB3_SEMANTICS`: torch's Adam, constant schedules, SB3's value
    clipping, clipped Box actions unless squashed)."""
    if args["use_sde"] and not isinstance(action_space, gym.spaces.Box):
        raise ValueError(
            f"use_sde: generalized State-Dependent Exploration needs a Box action space, got {action_space}"
        )
    check_squash_output(bool(policy_fields.get("squash")), bool(args["use_sde"]))
    rollout = args["n_steps"] * n_envs
    fields = {**SB3_SEMANTICS, **normalize, **policy_fields}  # policy_kwargs' network and box actions over SB3's
    return Config(
        env="custom",
        num_envs=n_envs,
        num_steps=args["n_steps"],
        total_timesteps=rollout,
        eval_freq=1,
        learning_rate=args["learning_rate"],
        num_epochs=args["n_epochs"],
        num_minibatches=minibatches(args["batch_size"], rollout, args["normalize_advantage"], n_envs),
        gamma=args["gamma"],
        gae_lambda=args["gae_lambda"],
        clip_range=args["clip_range"],
        clip_range_vf=args["clip_range_vf"],
        normalize_advantage=args["normalize_advantage"],
        ent_coef=args["ent_coef"],
        vf_coef=args["vf_coef"],
        max_grad_norm=args["max_grad_norm"],
        target_kl=args["target_kl"],
        verbose=min(args["verbose"], 2),
        seed=args["seed"],
        use_sde=args["use_sde"],
        sde_sample_freq=args["sde_sample_freq"] if args["sde_sample_freq"] > 0 else -1,
        **fields,
    )
