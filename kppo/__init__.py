"""kppo: PPO for TensorFlow/Keras with compiled rollouts and updates, TF-native environments, and export.

The public names below load on first use (PEP 562), so `import kppo` and `kppo --help` do not start TensorFlow;
the first of them to load imports TensorFlow quietly (`kppo._tf`) before anything else. Public subpackages:
`kppo.envs` (TF-native tasks and the `Task` contract), `kppo.callbacks` (SB3's callback API) and `kppo.config`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kppo.version import __version__

#: public name -> the module that defines it
_EXPORTS = {
    "HParam": "kppo.sb3.logger",
    "RMSpropTFLike": "kppo.core.optimizers",
    "load_results": "kppo.sb3.results_plotter",
    "ts2xy": "kppo.sb3.results_plotter",
    "sync_envs_normalization": "kppo.sb3.utils",
    "ActScaling": "kppo.agent.policy",
    "ActionMasker": "kppo.gym_envs.action_masks",
    "AtariVectorEnvAdapter": "kppo.vec_envs.ale_vector",
    "AtariWrapper": "kppo.vec_envs.atari",
    "ActorCriticPolicy": "kppo.sb3.policies",
    "BaseFeaturesExtractor": "kppo.sb3.torch_layers",
    "BaseCallback": "kppo.callbacks",
    "CallbackList": "kppo.callbacks",
    "CheckpointCallback": "kppo.callbacks",
    "CombinedExtractor": "kppo.agent.extractors",
    "Config": "kppo.config.options",
    "ConstantSchedule": "kppo.sb3.utils",
    "DummyVecEnv": "kppo.vec_envs.vec_env",
    "EvalCallback": "kppo.callbacks",
    "EveryNTimesteps": "kppo.callbacks",
    "FlattenExtractor": "kppo.agent.extractors",
    "FloatSchedule": "kppo.sb3.utils",
    "LinearSchedule": "kppo.sb3.utils",
    "LogEveryNTimesteps": "kppo.callbacks",
    "METRICS": "kppo.training.metrics",
    "MaskableEvalCallback": "kppo.callbacks",
    "MaskablePPO": "kppo.sb3.maskable_ppo",
    "Monitor": "kppo.vec_envs.monitor",
    "NatureCNN": "kppo.agent.extractors",
    "ObsScaling": "kppo.agent.policy",
    "PPO": "kppo.sb3.ppo",
    "PPOResult": "kppo.training.results",
    "Policy": "kppo.agent.policy",
    "PopulationResult": "kppo.training.results",
    "ProgressBarCallback": "kppo.callbacks",
    "RecurrentPPO": "kppo.sb3.recurrent_ppo",
    "SmallCNN": "kppo.agent.extractors",
    "StopTrainingOnMaxEpisodes": "kppo.callbacks",
    "StopTrainingOnNoModelImprovement": "kppo.callbacks",
    "StopTrainingOnRewardThreshold": "kppo.callbacks",
    "SubprocVecEnv": "kppo.vec_envs.vec_env",
    "Sweep": "kppo.config.options",
    "VecEnv": "kppo.vec_envs.vec_env",
    "VecEnvWrapper": "kppo.vec_envs.vec_env",
    "VecExtractDictObs": "kppo.vec_envs.vec_env",
    "VecFrameStack": "kppo.vec_envs.vec_frame_stack",
    "VecMonitor": "kppo.vec_envs.vec_env",
    "VecNormalize": "kppo.sb3.vec_normalize",
    "VecTransposeImage": "kppo.vec_envs.vec_transpose",
    "check_env": "kppo.sb3.utils",
    "constant_fn": "kppo.sb3.utils",
    "evaluate_policy": "kppo.vec_envs.evaluation",
    "export": "kppo.exporter.artifact",
    "get_action_masks": "kppo.sb3.utils",
    "get_flattened_obs_dim": "kppo.sb3.utils",
    "get_linear_fn": "kppo.sb3.utils",
    "is_masking_supported": "kppo.sb3.utils",
    "is_vecenv_wrapped": "kppo.sb3.utils",
    "is_wrapped": "kppo.sb3.utils",
    "make_atari_env": "kppo.vec_envs.atari",
    "make_vec_env": "kppo.vec_envs.env_util",
    "set_random_seed": "kppo.sb3.utils",
    "create_mlp": "kppo.sb3.torch_layers",
    "train": "kppo.training.train",
    "tune": "kppo.tuning.search",
    "TuneResult": "kppo.tuning.search",
    "unwrap_vec_normalize": "kppo.sb3.utils",
    "unwrap_vec_wrapper": "kppo.sb3.utils",
    "unwrap_wrapper": "kppo.sb3.utils",
}
_SUBPACKAGES = (
    "agent",
    "callbacks",
    "cli",
    "config",
    "core",
    "envs",
    "exporter",
    "gym_envs",
    "rollout",
    "sb3",
    "training",
    "tuning",
    "update",
)

__all__ = [
    "METRICS",
    "PPO",
    "ActScaling",
    "ActionMasker",
    "ActorCriticPolicy",
    "AtariVectorEnvAdapter",
    "AtariWrapper",
    "BaseCallback",
    "BaseFeaturesExtractor",
    "CallbackList",
    "CheckpointCallback",
    "CombinedExtractor",
    "Config",
    "ConstantSchedule",
    "DummyVecEnv",
    "EvalCallback",
    "EveryNTimesteps",
    "FlattenExtractor",
    "FloatSchedule",
    "HParam",
    "LinearSchedule",
    "LogEveryNTimesteps",
    "MaskableEvalCallback",
    "MaskablePPO",
    "Monitor",
    "NatureCNN",
    "ObsScaling",
    "PPOResult",
    "Policy",
    "PopulationResult",
    "ProgressBarCallback",
    "RMSpropTFLike",
    "RecurrentPPO",
    "SmallCNN",
    "StopTrainingOnMaxEpisodes",
    "StopTrainingOnNoModelImprovement",
    "StopTrainingOnRewardThreshold",
    "SubprocVecEnv",
    "Sweep",
    "TuneResult",
    "VecEnv",
    "VecEnvWrapper",
    "VecExtractDictObs",
    "VecFrameStack",
    "VecMonitor",
    "VecNormalize",
    "VecTransposeImage",
    "__version__",
    "check_env",
    "constant_fn",
    "create_mlp",
    "evaluate_policy",
    "export",
    "get_action_masks",
    "get_flattened_obs_dim",
    "get_linear_fn",
    "is_masking_supported",
    "is_vecenv_wrapped",
    "is_wrapped",
    "load_results",
    "make_atari_env",
    "make_vec_env",
    "set_random_seed",
    "sync_envs_normalization",
    "train",
    "ts2xy",
    "tune",
    "unwrap_vec_normalize",
    "unwrap_vec_wrapper",
    "unwrap_wrapper",
]

if TYPE_CHECKING:
    from kppo.vec_envs.vec_frame_stack import VecFrameStack
    from kppo.vec_envs.vec_transpose import VecTransposeImage
    from kppo.vec_envs.ale_vector import AtariVectorEnvAdapter
    from kppo.vec_envs.atari import AtariWrapper, make_atari_env
    from kppo.agent.extractors import CombinedExtractor, FlattenExtractor, NatureCNN, SmallCNN
    from kppo.agent.policy import ActScaling, ObsScaling, Policy
    from kppo.callbacks import (
        BaseCallback,
        CallbackList,
        CheckpointCallback,
        EvalCallback,
        EveryNTimesteps,
        LogEveryNTimesteps,
        MaskableEvalCallback,
        ProgressBarCallback,
        StopTrainingOnMaxEpisodes,
        StopTrainingOnNoModelImprovement,
        StopTrainingOnRewardThreshold,
    )
    from kppo.config.options import Config, Sweep
    from kppo.exporter.artifact import export
    from kppo.gym_envs.action_masks import ActionMasker
    from kppo.vec_envs.evaluation import evaluate_policy
    from kppo.vec_envs.monitor import Monitor
    from kppo.vec_envs.vec_env import (
        DummyVecEnv,
        SubprocVecEnv,
        VecEnv,
        VecEnvWrapper,
        VecExtractDictObs,
        VecMonitor,
    )
    from kppo.sb3.maskable_ppo import MaskablePPO
    from kppo.vec_envs.env_util import make_vec_env
    from kppo.sb3.ppo import PPO
    from kppo.sb3.recurrent_ppo import RecurrentPPO
    from kppo.sb3.policies import ActorCriticPolicy
    from kppo.core.optimizers import RMSpropTFLike
    from kppo.sb3.logger import HParam
    from kppo.sb3.results_plotter import load_results, ts2xy
    from kppo.sb3.torch_layers import BaseFeaturesExtractor, create_mlp
    from kppo.sb3.utils import (
        ConstantSchedule,
        FloatSchedule,
        LinearSchedule,
        check_env,
        constant_fn,
        get_action_masks,
        get_flattened_obs_dim,
        get_linear_fn,
        is_masking_supported,
        is_vecenv_wrapped,
        is_wrapped,
        set_random_seed,
        sync_envs_normalization,
        unwrap_vec_normalize,
        unwrap_vec_wrapper,
        unwrap_wrapper,
    )
    from kppo.sb3.vec_normalize import VecNormalize
    from kppo.training.metrics import METRICS
    from kppo.training.results import PopulationResult, PPOResult
    from kppo.training.train import train
    from kppo.tuning.search import TuneResult, tune


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        importlib.import_module("kppo._tf")  # TensorFlow's start-up noise silenced before any module imports it
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBPACKAGES:
        return importlib.import_module(f"kppo.{name}")
    raise AttributeError(f"module 'kppo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, *_SUBPACKAGES])
