"""`kppo.RecurrentPPO`: sb3-contrib's RecurrentPPO interface on `kppo.PPO` (translation only).

    model = kppo.RecurrentPPO("MlpLstmPolicy", env, policy_kwargs=dict(lstm_hidden_size=64))
    model.learn(100_000)
    state, starts = None, np.ones(n_envs, bool)
    actions, state = model.predict(obs, state=state, episode_start=starts, deterministic=True)

An LSTM before the actor's MLP and, with `enable_critic_lstm` (default), another before the critic's, each
`n_lstm_layers` deep (`Config.recurrent`, `lstm_hidden_size`, `n_lstm_layers`, `enable_critic_lstm`). The memory is
carried through rollouts and restarted at episode starts; the update replays sequences from the memory each started
with: chunks of `batch_size` steps of one env when that divides `n_steps` (sb3-contrib's minibatches are such runs),
else whole env rollouts (then `n_steps * n_envs / batch_size` must divide `n_envs`). `predict` returns the actor's
state (h, c), each [n_lstm_layers, n_envs, lstm_hidden_size], as sb3-contrib's does.
"""

from __future__ import annotations

import warnings
from typing import Any

from kppo.sb3.ppo import PPO
from kppo.core.errors import ArgumentError, ArgumentTypeError, NotSupportedError
from kppo.sb3.arguments import bool_kwarg, number_kwarg, policy_config
from kppo.sb3.contracts import check_shared_lstm

_LSTM_KEYS = ("lstm_hidden_size", "enable_critic_lstm", "n_lstm_layers", "shared_lstm", "lstm_kwargs")


def check_lstm_kwargs(lstm_kwargs: Any, layers: int = 1) -> None:
    """sb3-contrib's `lstm_kwargs` (torch.nn.LSTM's keywords) for kppo's LSTM of `layers` layers: `bias=True` is what
    kppo builds and `dropout` does nothing on one layer (torch warns, as here); dropout between layers (torch's, active
    in sb3-contrib's training mode) is not built, and anything else is a one-line refusal."""
    if lstm_kwargs is None:
        return
    if not isinstance(lstm_kwargs, dict):
        raise ArgumentTypeError(
            f"policy_kwargs.lstm_kwargs: expected a dict of torch.nn.LSTM keywords, got {lstm_kwargs!r}"
        )
    for key, value in lstm_kwargs.items():
        if key == "dropout":
            dropout = number_kwarg({key: value}, key, 0.0, float)
            if not 0.0 <= dropout <= 1.0:
                raise ArgumentError(f"policy_kwargs.lstm_kwargs.dropout: expected a number in [0, 1], got {value!r}")
            if dropout and layers > 1:
                raise NotSupportedError(
                    f"policy_kwargs.lstm_kwargs.dropout: expected 0 with n_lstm_layers={layers} (kppo's LSTM has no "
                    f"dropout between layers; a smaller lstm_hidden_size regularizes instead), got {value!r}"
                )
            if dropout:
                warnings.warn(
                    "policy_kwargs.lstm_kwargs.dropout: dropout applies between LSTM layers, and there is one "
                    "(torch.nn.LSTM warns the same): it has no effect",
                    UserWarning,
                    stacklevel=4,
                )
        elif key in LSTM_DEFAULTS:
            if value != LSTM_DEFAULTS[key][0]:
                raise NotSupportedError(
                    f"policy_kwargs.lstm_kwargs.{key}: expected {LSTM_DEFAULTS[key][0]!r} ({LSTM_DEFAULTS[key][1]}), "
                    f"got {value!r}"
                )
        else:
            raise ArgumentTypeError(
                f"policy_kwargs.lstm_kwargs: torch.nn.LSTM takes no {key!r} kppo can build (kppo reads: bias, dropout, "
                f"batch_first, bidirectional, proj_size)"
            )


#: torch.nn.LSTM keywords kppo's LSTM has one value of: (that value, why).
LSTM_DEFAULTS = {
    "bias": (True, "kppo's LSTM cells have biases"),
    "batch_first": (False, "sb3-contrib feeds its LSTM sequence-first; batch_first would misread its input"),
    "bidirectional": (False, "a policy acting step by step cannot read the future"),
    "proj_size": (0, "kppo's LSTM has no projection"),
}


def recurrent_policy_config(policy_kwargs: dict) -> dict[str, Any]:
    """sb3-contrib's MlpLstmPolicy kwargs -> Config fields."""
    kwargs = dict(policy_kwargs)
    lstm = {key: kwargs.pop(key) for key in _LSTM_KEYS if key in kwargs}
    layers = number_kwarg(dict(lstm), "n_lstm_layers", 1, int)
    if layers < 1 or layers != lstm.get("n_lstm_layers", 1):  # 2.5 is no layer count (torch.nn.LSTM refuses it)
        raise ArgumentError(f"policy_kwargs.n_lstm_layers: expected an integer >= 1, got {lstm['n_lstm_layers']!r}")
    shared, critic_lstm = bool_kwarg(lstm, "shared_lstm", False), bool_kwarg(lstm, "enable_critic_lstm", True)
    share_extractor = bool_kwarg(dict(kwargs), "share_features_extractor", True)
    check_shared_lstm(shared, critic_lstm, share_extractor)  # sb3-contrib's asserts, with its messages
    check_lstm_kwargs(lstm.get("lstm_kwargs"), layers)
    return {
        **policy_config(kwargs),
        "recurrent": "lstm",
        "lstm_hidden_size": number_kwarg(dict(lstm), "lstm_hidden_size", 256, int),
        "n_lstm_layers": layers,
        "enable_critic_lstm": critic_lstm,
        "shared_lstm": shared,
    }


class RecurrentPPO(PPO):
    """PPO with an LSTM policy, as sb3-contrib's `RecurrentPPO`: its defaults (n_steps=128, batch_size=128),
    "MlpLstmPolicy", "CnnLstmPolicy" (a NatureCNN the LSTMs read, shared, heads on the LSTMs: `net_arch=[]`) and
    "MultiInputLstmPolicy" (SB3's CombinedExtractor), and `predict(observation, state, episode_start, deterministic)`
    returning `(actions, state)` (`BaseAlgorithm.predict`: the LSTM state is the policy's)."""

    policy_names = ("MlpLstmPolicy", "CnnLstmPolicy", "MultiInputLstmPolicy")
    _policy_config = staticmethod(recurrent_policy_config)

    def __init__(
        self,
        policy: str,
        env: Any,
        learning_rate: Any = 3e-4,
        n_steps: int = 128,
        batch_size: int = 128,
        n_epochs: int = 10,
        **kwargs: Any,
    ):
        super().__init__(
            policy,
            env,
            learning_rate=learning_rate,
            n_steps=n_steps,
            batch_size=batch_size,
            n_epochs=n_epochs,
            **kwargs,
        )

    def _make_config(self, n_envs, action_space, normalize, fields):
        """sb3-contrib's minibatches (`Config.lstm_batching="rotated"`): each epoch, the env-major rollout rotated by a
        random offset and cut, in order, into windows of `batch_size` consecutive steps, each replayed from the LSTM
        states stored at its first step and wherever it enters another env's steps."""
        fields = {**fields, "lstm_batching": "rotated", "lstm_sequence_length": 0}
        return super()._make_config(n_envs, action_space, normalize, fields)
