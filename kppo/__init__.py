"""kppo: PPO for TensorFlow/Keras with compiled rollouts and updates, TF-native environments, and export."""

from kppo._tf import tf  # noqa: F401  (imports TensorFlow quietly before anything else)
from kppo.callbacks import (
    BaseCallback,
    CallbackList,
    CheckpointCallback,
    EvalCallback,
    StopTrainingOnMaxEpisodes,
    StopTrainingOnRewardThreshold,
)
from kppo.config import Config, Sweep
from kppo.envs.action_masks import ActionMasker
from kppo.evaluation import evaluate_policy
from kppo.exporter import export
from kppo.metrics import METRICS
from kppo.policy import ActScaling, ObsScaling, Policy
from kppo.maskable import MaskablePPO
from kppo.ppo import PPO, make_vec_env
from kppo.recurrent_ppo import RecurrentPPO
from kppo.training import PopulationResult, PPOResult, train
from kppo.vec_normalize import VecNormalize
from kppo.version import __version__


__all__ = [
    "ActScaling",
    "ActionMasker",
    "BaseCallback",
    "CallbackList",
    "CheckpointCallback",
    "Config",
    "EvalCallback",
    "METRICS",
    "MaskablePPO",
    "ObsScaling",
    "PPO",
    "PPOResult",
    "Policy",
    "PopulationResult",
    "RecurrentPPO",
    "StopTrainingOnMaxEpisodes",
    "StopTrainingOnRewardThreshold",
    "Sweep",
    "VecNormalize",
    "__version__",
    "evaluate_policy",
    "export",
    "make_vec_env",
    "train",
]
