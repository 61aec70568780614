"""A `kppo.PPO` (or `RecurrentPPO`, `MaskablePPO`) from a model Stable-Baselines3 saved: its hyperparameters from
the save's plain fields, its networks built by kppo from the saved spaces and policy_kwargs, SB3's weights assigned
(`kppo.sb3.sb3_weights`). What `PPO.load` does with an SB3 zip (`kppo.sb3.sb3_save`).

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

from kppo.agent.agent import build_agent
from kppo.agent.extractors import CombinedExtractor, FlattenExtractor, NatureCNN
from kppo.core.errors import NotSupportedError
from kppo.core.normalization import initial_stats
from kppo.gym_envs.spaces import flat_dim
from kppo.sb3.safe_pickle import Global, Instance, describe
from kppo.sb3.sb3_save import SB3Save, schedule_value
from kppo.sb3.sb3_weights import assign_sb3_weights

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
    args = {key: data.get(key, default) for key, default in ARGUMENTS.items()}
    args["learning_rate"] = schedule_value(data.get("learning_rate", saved.schedules.get("lr_schedule")), 3e-4)
    args["clip_range"] = schedule_value(saved.schedules.get("clip_range"), 0.2)
    vf = data.get("clip_range_vf", saved.schedules.get("clip_range_vf"))
    args["clip_range_vf"] = None if vf is None else schedule_value(vf, 0.2)
    args["stats_window_size"] = int(data.get("_stats_window_size", 100))
    return args


def model_from_sb3(cls: type, saved: SB3Save, env: Any, device: str, kwargs: dict[str, Any]) -> Any:
    """A `cls` (kppo.PPO or a subclass) with the saved model's hyperparameters and weights; `env` as `PPO.load`'s."""
    if saved.algorithm != cls.__name__:
        raise ValueError(
            f"path: {saved.source} holds an sb3 {saved.algorithm} model ({saved.policy_class}); load it with "
            f"kppo.{saved.algorithm}.load"
        )
    args = {**constructor_arguments(saved), **kwargs}
    model = cls(saved.policy, None, policy_kwargs=kppo_policy_kwargs(saved), device=device, **args)
    observation_space, action_space = saved.observation_space, saved.action_space
    fields = model._network_fields(observation_space)
    normalize = dict(normalize_obs=False, normalize_reward=False)
    config = model._make_config(int(saved.data.get("n_envs", 1)), action_space, normalize, fields)
    obs_dim = flat_dim(observation_space)
    with model._device_scope():
        agent = build_agent(config, observation_space, action_space)
        assign_sb3_weights(agent, saved.state_dict, f"{saved.source}: policy.pth")
    model.config, model.agent = config, agent
    model._spaces = (observation_space, action_space)
    model._loaded_stats = (initial_stats([obs_dim]), initial_stats(()))
    model.num_timesteps = int(saved.data.get("num_timesteps", 0))
    model._current_lr = model.learning_rate
    model.sb3_version = saved.version
    if env is not None:
        model.set_env(env)
    return model
