"""Environment steps/s of the TF-native MinAtar games alone (random actions, no policy) against the minatar package.

    python benchmarks/minatar_env.py                          # Breakout, 1,024 and 4,096 envs, XLA and not
    python benchmarks/minatar_env.py --games breakout asterix freeway space_invaders --envs 256 1024 4096

One compiled call runs `--steps` steps of `kppo.envs.make(<game>_minatar)` (sticky actions, auto-reset, episode
statistics) in a `tf.while_loop`, drawing uniform random actions each step; steps/s = envs x steps / wall time of
the best of `--repeats` calls after a first, compiling one. The reference is minatar's `Environment.act` in a
Python loop over one env (random actions, `reset` on terminal), the way a gymnasium vector env of minatar runs it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import kppo.envs
from kppo._tf import tf
import harness  # benchmarks/ is sys.path[0] for a script


def make_run(env: kppo.envs.VecEnv, num_envs: int, num_steps: int, jit_compile: bool):
    """A compiled function: (state, key) -> (state, total reward) after `num_steps` random-action steps."""
    num_actions = env.action_space.n

    def env_step(t, state, total, key):
        key_action, key_step = tf.unstack(
            tf.random.experimental.stateless_split(tf.random.experimental.stateless_fold_in(key, t), 2)
        )
        action = tf.random.stateless_uniform([num_envs], seed=key_action, minval=0, maxval=num_actions, dtype=tf.int32)
        result = env.step(state, action, key_step)
        return t + 1, result.state, total + tf.reduce_sum(result.reward), key

    def run(state, key):
        init = (tf.constant(0), state, tf.constant(0.0), key)
        _, state, total, _ = tf.while_loop(lambda t, *_: t < num_steps, env_step, init)
        return state, total

    return tf.function(run, jit_compile=jit_compile)


def time_tf(game: str, num_envs: int, num_steps: int, jit_compile: bool, repeats: int) -> tuple[float, float]:
    """(compile + first call seconds, best steps/s) of the TF-native env."""
    env = kppo.envs.make(f"{game}_minatar")
    run = make_run(env, num_envs, num_steps, jit_compile)
    state, _ = env.reset(tf.constant([0, 0]), num_envs)
    start = time.perf_counter()
    state, total = run(state, tf.constant([0, 1]))
    float(total)
    first = time.perf_counter() - start
    best = float("inf")
    for i in range(repeats):
        start = time.perf_counter()
        state, total = run(state, tf.constant([1, i]))
        float(total)  # waits for the result
        best = min(best, time.perf_counter() - start)
    return first, num_envs * num_steps / best


def time_minatar(game: str, num_steps: int) -> float:
    """Steps/s of minatar's own Environment (sticky actions on), one env, random minimal-set actions."""
    from minatar import Environment

    env = Environment(game)
    env.seed(0)
    env.reset()
    actions = env.minimal_action_set()
    choices = np.random.default_rng(0).integers(0, len(actions), num_steps)
    start = time.perf_counter()
    for a in choices:
        _, terminal = env.act(actions[a])
        env.state()  # an agent observes every frame
        if terminal:
            env.reset()
    return num_steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["breakout"])
    parser.add_argument("--envs", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--steps", type=int, default=500, help="steps per env in one compiled call")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--minatar-steps", type=int, default=20_000)
    args = parser.parse_args()
    rows = []
    for game in args.games:
        for num_envs in args.envs:
            for jit_compile in (True, False):
                first, rate = time_tf(game, num_envs, args.steps, jit_compile, args.repeats)
                xla = "yes" if jit_compile else "no"
                rows.append([game, "kppo TF-native", f"{num_envs:,}", xla, f"{first:.1f}", f"{rate:,.0f}"])
        rate = time_minatar(game, args.minatar_steps)
        rows.append([game, "minatar (numpy, 1 env)", 1, "—", "—", f"{rate:,.0f}"])
    print(harness.machine_header(None, "minatar"))
    print()
    print(harness.markdown_table(["game", "implementation", "envs", "XLA", "first call s", "steps/s"], rows))


if __name__ == "__main__":
    main()
