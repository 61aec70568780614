"""The tuning tests' base config: small enough to compile fast (no XLA), long enough that the learning rate
matters."""

from kppo.config.options import Config

TINY = Config(
    num_envs=4,
    num_steps=16,
    total_timesteps=4 * 16 * 8,
    num_minibatches=2,
    num_epochs=2,
    eval_freq=2,
    num_eval_envs=4,
    iterations_per_call=4,
    jit_rollout=False,
    jit_update=False,
    jit_eval=False,
)
