"""The Lightning-style training surface of the seed's `lit_sb3` PPO (`../shared/reference/lit-sb3-ppo-api.txt`), in
Keras terms, mixed into `kppo.PPO`: `hparams` / `hparams_initial` (the constructor's arguments), `current_epoch`
(rollout-update iterations done), `global_step` (gradient steps applied), `global_rank` / `local_rank` (the
`tf.distribute` worker and replica), `on_gpu`, `env`, `configure_optimizers()` (the Keras optimizer) and
`training_step(batch, batch_idx)` (one minibatch's PPO loss, as the update computes it). `learn`'s
`default_root_dir` is `run_dir` here: where logs, `hparams.yaml` and checkpoints go, as Lightning's."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import yaml

from kppo._tf import tf
from kppo.core.types import Batch
from kppo.training.runners.settings import update_settings
from kppo.update.ppo import minibatch_loss

__all__ = ["AttributeDict", "LightningSurface", "RolloutBufferSamples", "log_every"]


class AttributeDict(dict):
    """A dict whose keys also read and write as attributes (Lightning's `AttributeDict`)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as err:
            raise AttributeError(f"hparams: no hyperparameter {name!r}; have {sorted(self)}") from err

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


class RolloutBufferSamples(NamedTuple):
    """SB3's minibatch of a rollout (`RolloutBuffer.get`'s items), numpy arrays [batch, ...]: what
    `training_step` takes. sb3-contrib's masked buffer adds `action_masks`."""

    observations: Any
    actions: Any
    old_values: Any
    old_log_prob: Any
    advantages: Any
    returns: Any
    action_masks: Any = None


def log_every(log_interval: int | None, log_every_n_steps: int | None) -> int | None:
    """`learn`'s logging period in iterations: SB3's `log_interval` or lit_sb3's `log_every_n_steps` (a step is
    one iteration, as an epoch is); a one-line error when both are given and differ."""
    if log_every_n_steps is None:
        return log_interval
    if log_interval not in (1, None, log_every_n_steps):
        raise ValueError(
            f"log_every_n_steps: expected it alone or equal to log_interval={log_interval}, got {log_every_n_steps}"
        )
    return log_every_n_steps


def _plain(value: Any) -> Any:
    """A hyperparameter as YAML can hold it: schedules and classes by name, the rest as JSON sees it."""
    try:
        json.dumps(value)
        return value
    except TypeError:
        return getattr(value, "__qualname__", None) or repr(value)


class LightningSurface:
    """lit_sb3's LightningModule attributes over `kppo.PPO` (which sets `_hparams_initial`, `_iterations`, `agent`,
    `config`, `_sb3_env` and the scheduled values)."""

    _hparams_initial: dict[str, Any]
    _hparams: AttributeDict | None = None
    _iterations: int
    _schedules: Any
    agent: Any
    config: Any

    @property
    def hparams(self) -> AttributeDict:
        """The constructor's arguments (SB3's names; the env left out), mutable by the user as Lightning's; a
        change here does not retrain anything."""
        if self._hparams is None:
            self._hparams = AttributeDict(copy.deepcopy(self._hparams_initial))
        return self._hparams

    @property
    def hparams_initial(self) -> AttributeDict:
        """A copy of the constructor's arguments as they were given (changing it changes nothing)."""
        return AttributeDict(copy.deepcopy(self._hparams_initial))

    @property
    def current_epoch(self) -> int:
        """Rollout-update iterations done by this model's `learn` calls (an epoch is one iteration)."""
        return self._iterations

    @property
    def global_step(self) -> int:
        """Gradient steps applied so far (the Keras optimizer's `iterations`; fewer than epochs x minibatches after
        a target-KL stop)."""
        return 0 if self.agent is None else int(self.agent.optimizer.iterations.numpy())

    @property
    def global_rank(self) -> int:
        """This process's index among the `tf.distribute` cluster's workers (`TF_CONFIG`'s task index; 0 alone)."""
        if not os.environ.get("TF_CONFIG"):
            return 0
        return int(tf.distribute.cluster_resolver.TFConfigClusterResolver().task_id or 0)

    @property
    def local_rank(self) -> int:
        """The replica this code runs on within the worker (0 outside a replica function)."""
        return int(tf.get_static_value(tf.distribute.get_replica_context().replica_id_in_sync_group) or 0)

    @property
    def on_gpu(self) -> bool:
        """True when the networks' variables live on a GPU."""
        if self.agent is None:
            return False
        variable = self.agent.variables[0]
        return "GPU" in str(getattr(variable, "value", variable).device).upper()  # a Keras variable's tf.Variable

    def configure_optimizers(self) -> Any:
        """The Keras optimizer the update applies (torch's Adam semantics unless `adam_style` says otherwise)."""
        if self.agent is None:
            raise ValueError("configure_optimizers: the model has no networks yet; construct it with an env")
        return self.agent.optimizer

    def training_step(self, batch: RolloutBufferSamples | Any, batch_idx: int = 0) -> tf.Tensor:
        """One minibatch's PPO loss (a scalar tensor) under the current weights and scheduled clip / entropy
        coefficients, as the update computes it: advantages normalized within the minibatch when
        `normalize_advantage`. `batch`: `RolloutBufferSamples` (e.g. from `model.rollout_buffer.get(batch_size)`);
        `batch_idx` is Lightning's and does not change the loss."""
        del batch_idx
        if self.agent is None:
            raise ValueError("training_step: the model has no networks yet; construct it with an env")
        if self.agent.lstm is not None:
            raise ValueError(
                "training_step: expected an MLP or CNN policy; a recurrent minibatch is whole sequences with their "
                "LSTM states (RecurrentPPO's update replays them), not rows"
            )
        loss, _ = minibatch_loss(self.agent, self._update_settings(), self._batch(batch))
        return loss

    def _update_settings(self) -> Any:
        now = self._schedules
        settings = update_settings(self.config)._replace(clip_range=now.clip_range, ent_coef=now.ent_coef)
        return settings if now.clip_range_vf is None else settings._replace(clip_range_vf=now.clip_range_vf)

    def _batch(self, samples: Any) -> Batch:
        """SB3's sample fields as kppo's flat `Batch` (actions in the distribution's shape and dtype)."""
        fields = RolloutBufferSamples._fields[:6]
        missing = [f for f in fields if not hasattr(samples, f)]
        if missing:
            raise ValueError(
                f"batch: expected SB3's RolloutBufferSamples fields {list(fields)}, got {type(samples).__name__} "
                f"without {missing}"
            )
        dist = self.agent.dist
        obs = np.asarray(samples.observations)
        obs = obs.astype(np.float32) if obs.dtype == np.float64 else obs
        rows = len(obs)
        actions = np.asarray(samples.actions).reshape((rows, *dist.action_shape))
        masks = getattr(samples, "action_masks", None)
        if masks is None and self.config.action_masks:
            raise ValueError("batch: expected action_masks (MaskablePPO's loss is over the valid actions), got None")
        mask = np.zeros((rows, 0), bool) if masks is None else np.asarray(masks, bool).reshape(rows, -1)

        def flat(x: Any) -> tf.Tensor:
            return tf.constant(np.asarray(x, np.float32).reshape(rows))

        return Batch(
            tf.constant(obs),
            tf.constant(actions.astype(dist.action_dtype.as_numpy_dtype)),
            flat(samples.old_log_prob),
            flat(samples.old_values),
            flat(samples.advantages),
            flat(samples.returns),
            tf.constant(mask),
        )

    def _write_hparams(self, directory: Path) -> None:
        """Lightning's `hparams.yaml` in the run's directory."""
        directory.mkdir(parents=True, exist_ok=True)
        plain = {name: _plain(value) for name, value in self.hparams.items()}
        (directory / "hparams.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
