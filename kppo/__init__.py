"""kppo: PPO for TensorFlow/Keras with compiled rollouts and updates, TF-native environments, and export."""

from kppo._tf import tf  # noqa: F401  (imports TensorFlow quietly before anything else)
from kppo.config import Config
from kppo.policy import ActScaling, ObsScaling, Policy
from kppo.train import METRICS, PPOResult, train

__version__ = "0.1.0"

__all__ = ["ActScaling", "Config", "METRICS", "ObsScaling", "PPOResult", "Policy", "__version__", "train"]
