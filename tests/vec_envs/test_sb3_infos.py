"""SB3's per-env infos are built once (`kppo.gym_envs.vector_info.sb3_info`): `TimeLimit.truncated` is
`truncated and not terminated` (SB3's rule), whether `VecEnv.step` returns the info or a callback reads it from
`self.locals` during `learn`."""

import gymnasium as gym
import numpy as np

import kppo


class EndsBothWays(gym.Env):
    """Episodes of 3 steps; the first ends terminated and truncated at once, the second truncated only, and so on."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.t, self.episode = 0, -1

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.episode = 0, self.episode + 1
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t == 3
        obs = np.full(2, self.t / 3, np.float32)
        return obs, 1.0, end and self.episode % 2 == 0, end, {"t": self.t}


def test_a_step_both_terminated_and_truncated_is_not_a_truncation_in_vec_env_step():
    env = kppo.DummyVecEnv([EndsBothWays])
    env.reset()
    ends = []
    for _ in range(6):
        _, _, dones, infos = env.step(np.zeros(1, np.int64))
        if dones[0]:
            ends.append((infos[0]["TimeLimit.truncated"], infos[0]["terminal_observation"].tolist(), infos[0]["t"]))
    assert ends == [(False, [1.0, 1.0], 3), (True, [1.0, 1.0], 3)]


def test_a_callback_sees_the_same_rule_during_learn():
    seen = []

    class Record(kppo.callbacks.BaseCallback):
        def _on_step(self) -> bool:
            for done, info in zip(self.locals["dones"], self.locals["infos"]):
                if done:
                    seen.append((info["TimeLimit.truncated"], info["terminal_observation"].tolist(), "episode" in info))
            return True

    model = kppo.PPO("MlpPolicy", EndsBothWays(), n_steps=6, batch_size=6, n_epochs=1, seed=0)
    model.learn(6, callback=Record())
    assert seen == [(False, [1.0, 1.0], True), (True, [1.0, 1.0], True)]
