"""A `kppo.PPO` (or `RecurrentPPO`, `MaskablePPO`) from a model Stable-Baselines3 saved: its hyperparameters from
the save's plain fields, its networks built by kppo from the saved spaces and policy_kwargs, SB3's weights assigned
(`kppo.sb3.saves.sb3_weights`). What `PPO.load` does with an SB3 zip (`kppo.sb3.saves.sb3_save`).

    SB3 policy_kwargs (as saved)             kppo
    activation_fn torch.nn.{Tanh, ReLU, ...} the activation's name (torch's LeakyReLU: refused, its slope differs)
    features_extractor_class SB3's NatureCNN, FlattenExtractor, CombinedExtractor
                                             kppo's classes of the same name (a user's torch module: refused)
    optimizer_class torch.optim.*            `arguments.optimizer_config` reads its module and name
    net_arch, ortho_init, log_std_init, squash_output, full_std, share_features_extractor, normalize_images,
    lstm_hidden_size, enable_critic_lstm, shared_lstm, n_lstm_layers
                                             as `kppo.PPO(policy_kwargs=...)` reads them
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from kppo.agent.agent import build_agent
from kppo.training.runners.settings import agent_spec
from kppo.agent.extractors import CombinedExtractor, FlattenExtractor, NatureCNN
from kppo.core.errors import NotSupportedError
from kppo.core.normalization import initial_stats
from kppo.gym_envs.spaces import flat_dim
from kppo.sb3.saves.safe_pickle import Global, Instance, describe
from kppo.sb3.saves.sb3_save import SB3Save, schedule_value
from kppo.sb3.saves.sb3_weights import assign_sb3_weights

#: torch activation classes -> kppo's activation names (torch's LeakyReLU slope, 0.01, is not Keras' 0.2: refused).
ACTIVATIONS = {
    f"torch.nn.modules.activation.{cls}": name
    for cls, name in {
        "Tanh": "tanh",
        "ReLU": "relu",
        "ELU": "elu",
        "SELU": "selu",
        "SiLU": "silu",
        "Sigmoid": "sigmoid",
        "Softplus": "softplus",
        "GELU": "gelu",
    }.items()
}
EXTRACTORS = {
    "stable_baselines3.common.torch_layers.NatureCNN": NatureCNN,
    "stable_baselines3.common.torch_layers.FlattenExtractor": FlattenExtractor,
    "stable_baselines3.common.torch_layers.CombinedExtractor": CombinedExtractor,
}
#: The extractor each SB3 policy uses by default (for `features_extractor_kwargs` given without a class).
DEFAULT_EXTRACTORS = {"CnnPolicy": NatureCNN, "MultiInputPolicy": CombinedExtractor, "MultiInputLstmPolicy": None}
#: SB3's constructor arguments read from the save's plain fields, and their SB3 defaults.
ARGUMENTS = {
    "n_steps": 2048,
    "batch_size": 64,
    "n_epochs": 10,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "normalize_advantage": True,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "target_kl": None,
    "use_sde": False,
    "sde_sample_freq": -1,
    "seed": None,
    "verbose": 0,
}
#: The type of the saved value of each of those whose default is None (SB3 writes what its user passed: a number
#: field may hold an int).
_NONE_DEFAULTS = {"target_kl": float, "seed": int}


def _name_only(cls_path: str) -> type:
    """A stand-in class that only carries `module.qualname` (what `arguments.optimizer_config` reads of a torch
    optimizer class); nothing is imported."""
    module, _, name = cls_path.rpartition(".")
    return type(name, (), {"__module__": module, "__qualname__": name})


def kppo_policy_kwargs(saved: SB3Save) -> dict[str, Any]:
    """The saved policy_kwargs as `kppo.PPO(policy_kwargs=...)` reads them (see the module docstring)."""
    out, source = dict(saved.policy_kwargs), saved.source
    activation = out.get("activation_fn")
    if isinstance(activation, Global):
        if str(activation) not in ACTIVATIONS:
            raise NotSupportedError(
                f"{source}: policy_kwargs.activation_fn: expected one of torch's "
                f"{', '.join(c.rsplit('.', 1)[1] for c in ACTIVATIONS)} (kppo builds those), got {activation}"
            )
        out["activation_fn"] = ACTIVATIONS[str(activation)]
    extractor = out.get("features_extractor_class")
    if isinstance(extractor, Global):
        if str(extractor) not in EXTRACTORS:
            raise NotSupportedError(
                f"{source}: policy_kwargs.features_extractor_class: {extractor}, a torch module kppo cannot rebuild "
                f"(it maps SB3's {', '.join(c.rsplit('.', 1)[1] for c in EXTRACTORS)})"
            )
        out["features_extractor_class"] = EXTRACTORS[str(extractor)]
    elif out.get("features_extractor_kwargs") and DEFAULT_EXTRACTORS.get(saved.policy):
        out["features_extractor_class"] = DEFAULT_EXTRACTORS[saved.policy]
    if isinstance(out.get("optimizer_class"), Global):
        out["optimizer_class"] = _name_only(str(out["optimizer_class"]))
    for key, value in out.items():
        if isinstance(value, (Global, Instance)):
            raise NotSupportedError(
                f"{source}: policy_kwargs.{key}: {describe(value)}, which kppo cannot map onto its networks"
            )
    return out


def constructor_arguments(saved: SB3Save) -> dict[str, Any]:
    """The constructor arguments of the saved model (schedules at their saved constant value)."""
    data = saved.data
    args = {key: _typed(saved, key, data.get(key, default), default) for key, default in ARGUMENTS.items()}
    args["learning_rate"] = schedule_value(data.get("learning_rate", saved.schedules.get("lr_schedule")), 3e-4)
    args["clip_range"] = schedule_value(saved.schedules.get("clip_range"), 0.2)
    vf = data.get("clip_range_vf", saved.schedules.get("clip_range_vf"))
    args["clip_range_vf"] = None if vf is None else schedule_value(vf, 0.2)
    args["stats_window_size"] = saved_int(saved, "_stats_window_size", 100)
    return args


def _typed(saved: SB3Save, key: str, value: Any, default: Any) -> Any:
    """`value` of the saved field `key` when it has the type of SB3's argument (that of `default`; None where
    SB3's default is None); else a one-line ValueError naming the file and the field."""
    kind = _NONE_DEFAULTS.get(key, type(default))
    if value is None and default is None:
        return value
    if kind is bool:
        fits = isinstance(value, bool)
    else:
        fits = not isinstance(value, bool) and isinstance(value, (int, float) if kind is float else int)
    if not fits:
        expected = {bool: "true or false", int: "an integer", float: "a number"}[kind]
        raise ValueError(f"{saved.source}: data[{key!r}]: expected {expected}, got {value!r}")
    return value


def saved_int(saved: SB3Save, key: str, default: int) -> int:
    """The integer field `key` of the save's `data` (`default` when absent); anything else is a one-line ValueError
    naming the file and the field."""
    value = saved.data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{saved.source}: data[{key!r}]: expected an integer, got {value!r}")
    return value


def _action_width(space: Any) -> int:
    """The width of the action head's output for `space` (its bias alone holds as many weights)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec, dtype=np.float64))
    return int(np.prod(space.shape or (1,), dtype=np.float64))


def check_fits(saved: SB3Save, config: Any, observation_dim: int) -> None:
    """A one-line ValueError when the networks `config` describes (or the observations, or the actions) need more
    weights than the save's state_dict holds: policy_kwargs or spaces changed after SB3 saved the weights
    (`net_arch: [10**6, 10**6]`, `Discrete(2**40)` observations, a MultiDiscrete of 2**28 choices), which building
    would try to allocate."""
    held = sum(int(np.size(tensor)) for tensor in saved.state_dict.values())
    # the networks' weights, the observation statistics, the action head's biases
    least = max(agent_spec(config).least_weights(), observation_dim, _action_width(saved.action_space))
    if least > held:
        raise ValueError(
            f"{saved.source}: policy.pth: expected the weights of the saved policy_kwargs and spaces (at least "
            f"{least:,}), got a state_dict of {held:,} (policy_kwargs or the spaces were changed after saving)"
        )


def model_from_sb3(cls: type, saved: SB3Save, env: Any, device: str, kwargs: dict[str, Any]) -> Any:
    """A `cls` (kppo.PPO or a subclass) with the saved model's hyperparameters and weights; `env` as `PPO.load`'s.
    kppo's one-line refusals of the saved values (the constructor's, the Config's) name the file."""
    if saved.algorithm != cls.__name__:
        raise ValueError(
            f"path: {saved.source} holds an sb3 {saved.algorithm} model ({saved.policy_class}); load it with "
            f"kppo.{saved.algorithm}.load"
        )
    try:
        model, config = _model(cls, saved, device, kwargs)
        observation_space, action_space = saved.observation_space, saved.action_space
        obs_dim = flat_dim(observation_space)
        check_fits(saved, config, obs_dim)
        with model._device_scope():
            agent = build_agent(agent_spec(config), observation_space, action_space)
            assign_sb3_weights(agent, saved.state_dict, f"{saved.source}: policy.pth")
    except ValueError as err:
        raise _naming(err, saved.source) from None
    model.sb3_version = saved.version
    spaces, stats = (observation_space, action_space), (initial_stats([obs_dim]), initial_stats(()))
    model._set_networks(config, agent, spaces, stats, saved_int(saved, "num_timesteps", 0), env)
    return model


def _model(cls: type, saved: SB3Save, device: str, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The model of the saved hyperparameters (`kwargs` over them) and the Config of its networks."""
    args = {**constructor_arguments(saved), **kwargs}
    model = cls(saved.policy, None, policy_kwargs=kppo_policy_kwargs(saved), device=device, **args)
    fields = model._network_fields(saved.observation_space)
    normalize = dict(normalize_obs=False, normalize_reward=False)
    config = model._make_config(saved_int(saved, "n_envs", 1), saved.action_space, normalize, fields)
    return model, config


def _naming(err: ValueError, source: str) -> ValueError:
    """`err` with `source` in front of its message when it does not name it yet (same type when it can be)."""
    message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    if source in message:
        return err
    try:
        return type(err)(f"{source}: {message}")
    except TypeError:  # an exception type with other arguments (UnicodeDecodeError, ...)
        return ValueError(f"{source}: {message}")
