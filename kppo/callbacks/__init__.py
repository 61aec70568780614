"""Training callbacks with Stable-Baselines3 2.x's interface (our own implementation).

The model a callback is attached to needs:
    - `model.predict(observation, state=None, episode_start=None, deterministic=False) -> (actions, state)` on raw
      observations (one, or a batch),
    - `model.num_timesteps: int` (environment steps so far, all sub-envs together),
    - `model.save(path)`,
    - `model.get_env()` (the training env, used by `BaseCallback.training_env`),
    - optionally `model.logger` with `.record(key, value)`.

What a training loop does with a callback (as SB3's `learn`):

    callback = make_callback(user_callback)        # None, callable, list or BaseCallback
    callback.init_callback(model)
    callback.on_training_start(locals(), globals())
    for each rollout:
        callback.on_rollout_start()
        for each step of the (vector) env:        # model.num_timesteps already advanced by num_envs
            callback.update_locals(locals())      # exposes e.g. `dones` to the callbacks
            if not callback.on_step():            # any falsy result, None included, stops training (as SB3)
                stop training
        callback.on_rollout_end()
    callback.on_training_end()

`n_calls` counts `on_step` calls (one per vector-env step, i.e. `num_envs` timesteps), so the `save_freq` and
`eval_freq` below are in calls; use `max(freq // num_envs, 1)` to think in timesteps.
"""

from kppo.callbacks.base import BaseCallback, CallbackList, ConvertCallback, EventCallback, make_callback
from kppo.callbacks.builtin import (
    CheckpointCallback,
    EvalCallback,
    MaskableEvalCallback,
    StopTrainingOnMaxEpisodes,
    StopTrainingOnNoModelImprovement,
    StopTrainingOnRewardThreshold,
)
from kppo.callbacks.progress import EveryNTimesteps, LogEveryNTimesteps, ProgressBarCallback

__all__ = [
    "BaseCallback",
    "CallbackList",
    "CheckpointCallback",
    "ConvertCallback",
    "EvalCallback",
    "EventCallback",
    "EveryNTimesteps",
    "LogEveryNTimesteps",
    "MaskableEvalCallback",
    "ProgressBarCallback",
    "StopTrainingOnMaxEpisodes",
    "StopTrainingOnNoModelImprovement",
    "StopTrainingOnRewardThreshold",
    "make_callback",
]
