"""A user's VecEnv written as a subclass of SB3's abstract `VecEnv` (what SB3's docs and its own DummyVecEnv do:
`super().__init__(num_envs, observation_space, action_space)`, then reset / step_async / step_wait / close / seed /
get_attr / set_attr / env_method / env_is_wrapped) trains with `kppo.PPO`, and gives the run that kppo's own
DummyVecEnv over the same envs gives."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import kppo


class ListVecEnv(kppo.VecEnv):
    """SB3's contract by hand: env i reset with seed + i; a finished env is reset at once, its last observation in
    `infos[i]["terminal_observation"]`, `TimeLimit.truncated` when the time limit ended it."""

    def __init__(self, env_fns, drop_terminal_observation: bool = False):
        self.envs = [fn() for fn in env_fns]
        first = self.envs[0]
        super().__init__(len(self.envs), first.observation_space, first.action_space)
        self.seeds: list[int | None] = [None] * len(self.envs)
        self.drop = drop_terminal_observation
        self.closed = False

    def seed(self, seed=None):
        self.seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        return self.seeds

    def reset(self):
        obs = [env.reset(seed=s)[0] for env, s in zip(self.envs, self.seeds)]
        self.seeds = [None] * self.num_envs
        return np.stack(obs)

    def step_async(self, actions):
        self.actions = actions

    def step_wait(self):
        obs, rewards, dones, infos = [], [], [], []
        for env, action in zip(self.envs, self.actions):
            o, r, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                info = {**info, "TimeLimit.truncated": truncated and not terminated}
                if not self.drop:
                    info["terminal_observation"] = o
                o, _ = env.reset()
            obs.append(o)
            rewards.append(r)
            dones.append(terminated or truncated)
            infos.append(info)
        return np.stack(obs), np.array(rewards, np.float32), np.array(dones), infos

    def close(self):
        self.closed = True
        for env in self.envs:
            env.close()

    def get_attr(self, attr_name, indices=None):
        return [getattr(env.unwrapped, attr_name) for env in self.envs]

    def set_attr(self, attr_name, value, indices=None):
        for env in self.envs:
            setattr(env.unwrapped, attr_name, value)

    def env_method(self, method_name, *args, indices=None, **kwargs):
        return [getattr(env.unwrapped, method_name)(*args, **kwargs) for env in self.envs]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False] * self.num_envs


def _fns():
    return [lambda: gym.make("CartPole-v1", max_episode_steps=40)] * 2


def test_a_users_sb3_vecenv_trains_as_kppos_dummy_vec_env_over_the_same_envs():
    settings = dict(n_steps=64, batch_size=32, n_epochs=2, seed=0)
    mine = ListVecEnv(_fns())
    theirs = kppo.DummyVecEnv(_fns())
    model_a = kppo.PPO("MlpPolicy", mine, **settings).learn(64 * 2 * 3)
    model_b = kppo.PPO("MlpPolicy", theirs, **settings).learn(64 * 2 * 3)
    assert model_a.get_env() is mine and model_a.get_env().get_attr("gravity") == [9.8, 9.8]
    for a, b in zip(model_a.agent.variables, model_b.agent.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert [len(model_a.ep_info_buffer), model_a.num_timesteps] == [len(model_b.ep_info_buffer), 384]
    mine.close()
    assert mine.closed


def test_a_finished_env_without_its_terminal_observation_is_one_line():
    model = kppo.PPO("MlpPolicy", ListVecEnv(_fns(), drop_terminal_observation=True), n_steps=64, batch_size=64)
    with pytest.raises(ValueError, match=r"ListVecEnv\.step_wait: expected infos\[\d\]\['terminal_observation'\]"):
        model.learn(64 * 2)


def test_the_abstract_signature_needs_both_spaces():
    with pytest.raises(ValueError, match="expected both spaces, got None"):
        kppo.VecEnv(2, gym.spaces.Discrete(2))
