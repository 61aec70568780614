"""RL-Zoo's hyperparameter files as the base config of a search: its CartPole entry as RL-Zoo 2.9.2 ships it."""

import pytest

from kppo.tuning.space import default_space, parse_space
from kppo.tuning.zoo import read_zoo

# rl_zoo3 2.9.2, hyperparams/ppo.yml (CartPole-v1 and, abridged, Pendulum-v1)
ZOO = """
CartPole-v1:
  n_envs: 8
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 32
  batch_size: 256
  gae_lambda: 0.8
  gamma: 0.98
  n_epochs: 20
  ent_coef: 0.0
  learning_rate: lin_0.001
  clip_range: lin_0.2

Pendulum-v1:
  n_envs: 4
  n_timesteps: !!float 1e5
  policy: 'MlpPolicy'
  n_steps: 1024
  gae_lambda: 0.95
  gamma: 0.9
  n_epochs: 10
  ent_coef: 0.0
  learning_rate: !!float 1e-3
  clip_range: 0.2
  use_sde: True
  sde_sample_freq: 4
  normalize: "{'norm_obs': True, 'norm_reward': False}"
  policy_kwargs: "dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU, net_arch=dict(pi=[64], vf=[64]))"
"""


def test_rl_zoos_cartpole_entry_on_sb3s_defaults(tmp_path):
    path = tmp_path / "ppo.yml"
    path.write_text(ZOO)
    env, config = read_zoo(path, "CartPole-v1")
    assert env == "CartPole-v1" and config.env == "CartPole-v1" and config.env_backend == "gymnasium"
    assert (config.num_envs, config.num_steps, config.total_timesteps) == (8, 32, 391 * 256)  # SB3: >= 100k
    assert config.num_minibatches == 1  # batch_size 256 = the whole 8 x 32 rollout
    assert (config.learning_rate, config.lr_schedule, config.clip_range, config.clip_schedule) == (
        0.001,
        "linear",
        0.2,
        "linear",
    )
    assert (config.gamma, config.gae_lambda, config.num_epochs, config.ent_coef) == (0.98, 0.8, 20, 0.0)
    assert config.clip_range_vf is None and config.adam_style == "torch"  # SB3's, not kppo's CartPole setting
    assert config.eval_freq == 1 and config.num_eval_envs == 5  # RL-Zoo's search: n_timesteps // 1e5 rounds


def test_rl_zoos_sampled_rates_replace_the_files_schedules_as_rl_zoo_does(tmp_path):
    # RL-Zoo's sample_ppo_params returns plain floats, which replace `lin_0.001` / `lin_0.2`: constant rates.
    path = tmp_path / "ppo.yml"
    path.write_text(ZOO)
    _, config = read_zoo(path, "CartPole-v1")
    trial = default_space(config).apply(config, {"learning_rate": 3e-4, "clip_range": 0.3})
    assert (trial.learning_rate, trial.lr_schedule, trial.clip_range, trial.clip_schedule) == (
        3e-4,
        "constant",
        0.3,
        "constant",
    )
    # A budget counted as SB3's learn counts it: whole rollouts until n_timesteps (100k) is reached.
    space = default_space(config.replace(total_timesteps=50_000))
    assert space.apply(config, {"n_steps_pow": 12}).total_timesteps == 4 * 8 * 4096  # 131,072 >= 100k
    assert space.apply(config, {"n_steps_pow": 5}).total_timesteps == 391 * 8 * 32  # 100,096
    assert space.apply(config.replace(total_timesteps=20_000), {"n_steps_pow": 12}).total_timesteps == 8 * 4096
    # A space of one's own samples a schedule's starting value, keeping the schedule.
    own = parse_space({"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-3}}, config)
    assert own.apply(config, {"learning_rate": 3e-4}).lr_schedule == "linear"


def test_policy_kwargs_and_normalize_strings_are_read_as_syntax_never_run(tmp_path):
    path = tmp_path / "ppo.yml"
    path.write_text(ZOO)
    _, config = read_zoo(path, "Pendulum-v1")
    assert config.activation == "relu" and config.actor_hidden_units == (64,) == config.critic_hidden_units
    assert (config.log_std_init, config.kernel_init, config.use_sde, config.sde_sample_freq) == (
        -2.0,
        "torch_default",
        True,
        4,
    )
    assert config.normalize_obs and not config.normalize_reward
    path.write_text(ZOO.replace("'norm_reward': False", "'norm_reward': False, 'clip_obs': 5.0, 'epsilon': 1e-6"))
    _, clipped = read_zoo(path, "Pendulum-v1")
    assert (clipped.clip_obs, clipped.clip_reward, clipped.norm_epsilon) == (5.0, 10.0, 1e-6)
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.yml"
    evil.write_text(f"CartPole-v1:\n  policy_kwargs: \"__import__('os').system('touch {marker}')\"\n")
    with pytest.raises(ValueError, match=r"CartPole-v1.policy_kwargs: expected literals, dict\(...\)"):
        read_zoo(evil)
    assert not marker.exists()


def test_a_file_of_many_envs_needs_env_and_bad_entries_name_the_file(tmp_path):
    path = tmp_path / "ppo.yml"
    path.write_text(ZOO)
    with pytest.raises(ValueError, match=r"an RL-Zoo file of 2 envs; name one with --env"):
        read_zoo(path)
    with pytest.raises(ValueError, match=r"--env: expected one of the file's envs"):
        read_zoo(path, "Acrobot-v1")
    bad = tmp_path / "bad.yml"
    bad.write_text("CartPole-v1:\n  n_stepz: 32\n")
    with pytest.raises(ValueError, match=r"RL-Zoo YAML '.*bad.yml': CartPole-v1.n_stepz: .*unknown option 'n_stepz'"):
        read_zoo(bad)
    lstm = tmp_path / "lstm.yml"
    lstm.write_text("CartPole-v1:\n  policy: MlpLstmPolicy\n")
    with pytest.raises(ValueError, match=r"CartPole-v1.policy: expected one of MlpPolicy, .*'MlpLstmPolicy'"):
        read_zoo(lstm)
