"""Train PPO on the TF-native CartPole-v1 with the default (fixed) setting and evaluate the final policy.

python examples/train_cartpole.py
"""

import gymnasium as gym
import numpy as np

import kppo

result = kppo.train("CartPole-v1", kppo.Config(verbose=1), seed=0)
print(f"compile {result.timings['compile_s']:.1f} s, run {result.timings['run_s']:.1f} s")

# The trained policy acts on raw gymnasium observations (numpy in, numpy out).
env = gym.make("CartPole-v1")
returns = []
for episode in range(10):
    obs, _ = env.reset(seed=episode)
    done, total = False, 0.0
    while not done:
        obs, reward, terminated, truncated, _ = env.step(int(result.policy.get_action(obs)))
        total += reward
        done = terminated or truncated
    returns.append(total)
print(f"gymnasium CartPole-v1, deterministic policy: {np.mean(returns):.1f} +- {np.std(returns):.1f} over 10 episodes")
