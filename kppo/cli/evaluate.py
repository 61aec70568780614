"""`kppo eval RUN_DIR|ARTIFACT|SB3_ZIP`: closed-loop gymnasium episodes of a run (or its newest checkpoint), an agent
directory, a .tflite artifact or an SB3 save, played as `kppo.evaluate_policy` plays a model's `predict`; the env's
spaces are checked against the agent's before the first episode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kppo.cli.configs import gym_id
from kppo.cli.sources import is_unfinished_run, load_unfinished_run, sb3_model


def add_eval_parser(sub: Any) -> None:
    """`kppo eval`'s arguments, on the root parser's subparsers `sub`."""
    ev = sub.add_parser("eval", help="closed-loop episodes of a run, agent directory or .tflite artifact")
    ev.add_argument("target", metavar="RUN_DIR|ARTIFACT|SB3_ZIP")
    ev.add_argument("--episodes", type=int, default=10)
    ev.add_argument("--env", help="gymnasium id (default: the training env)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--vecnormalize", metavar="PKL", help="an SB3 save's vec_normalize.pkl (its statistics)")
    ev.set_defaults(func=cmd_eval)


class _ArtifactModel:
    """The `predict` interface `kppo.evaluate_policy` plays with, around a .tflite artifact (`TFLiteRunner`): one
    observation at a time, with the env's mask for a masked artifact and the state carried for a recurrent one."""

    def __init__(self, runner, space):
        self.runner, self.space, self.action_masks = runner, space, runner.masked

    def predict(self, observation, state=None, episode_start=None, deterministic=True, action_masks=None):
        from kppo.gym_envs.spaces import input_rows

        del deterministic
        obs = observation
        row = input_rows(
            self.space,
            {k: np.asarray(v)[None] for k, v in obs.items()} if isinstance(obs, dict) else np.asarray(obs)[None],
        )
        masks = None if action_masks is None else np.asarray(action_masks, np.float32).reshape(1, -1)
        if self.runner.units is None:
            out, state = self.runner(row, masks)[0], None
        else:
            if state is None or (episode_start is not None and np.asarray(episode_start).any()):
                state = (np.zeros((1, self.runner.units), np.float32),) * 2
            out, h, c = self.runner.step(row, *state, masks)
            out, state = out[0], (h, c)
        return (int(out) if np.ndim(out) == 0 else out), state


def _space_kind(space) -> str:
    """Type and shape of a space (Discrete: its size): what agent and env must share (bounds may differ)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, gym.spaces.Dict):
        return "Dict(" + ", ".join(f"{key}: {_space_kind(sub)}" for key, sub in space.spaces.items()) + ")"
    return f"{type(space).__name__}{tuple(space.shape)}"


def _gym_returns(model, env_id: str, episodes: int, seed: int, spaces: tuple | None) -> list[float]:
    import gymnasium as gym

    from kppo.vec_envs.evaluation import evaluate_policy

    env = gym.make(env_id)
    try:
        want = tuple(_space_kind(space) for space in spaces or (env.observation_space, env.action_space))
        got = (_space_kind(env.observation_space), _space_kind(env.action_space))
        if want != got:
            raise ValueError(
                f"--env: expected an env with the agent's spaces (observation {want[0]}, action {want[1]}), "
                f"got {env_id!r} with observation {got[0]}, action {got[1]}"
            )
        env.reset(seed=seed)  # seeds the episode sequence; evaluate_policy resets without seeds after this
        returns, _ = evaluate_policy(model, env, n_eval_episodes=episodes, return_episode_rewards=True, warn=False)
    finally:
        env.close()
    return returns


def cmd_eval(args) -> int:
    from kppo.exporter.artifact import resolve_source
    from kppo.exporter.runner import TFLiteRunner

    if args.episodes < 1:
        raise ValueError(f"--episodes: expected an integer >= 1, got {args.episodes}")
    if not 0 <= args.seed < 2**32:  # what gymnasium's reset(seed=) takes
        raise ValueError(f"--seed: expected an integer from 0 to 2**32 - 1, got {args.seed}")
    if args.env:
        args.env = gym_id(args.env, "--env")
    target = Path(args.target)
    if target.is_dir() and (target / "agent").is_dir():
        target = target / "agent"
    sb3 = sb3_model(target, args.vecnormalize) if target.suffix != ".tflite" else None
    if sb3 is not None:  # a zip Stable-Baselines3 saved: it names no env
        if not args.env:
            raise ValueError("--env: expected a gymnasium id for an SB3 save (SB3's zip names no env)")
        args.start_work()
        returns = _gym_returns(sb3.kppo_policy, args.env, args.episodes, args.seed, sb3._model_spaces())
        print(f"{args.env}: {np.mean(returns):.2f} +- {np.std(returns):.2f} over {args.episodes} episodes")
        return 0
    if args.vecnormalize:
        raise ValueError("--vecnormalize: only for a zip Stable-Baselines3 saved (kppo's runs hold their statistics)")
    if not target.is_dir() and target.suffix != ".tflite":  # a model saved as a zip (kppo.PPO.save, SB3's habit)
        from kppo.agent.archive import agent_dir

        target = agent_dir(target)
    model: Any  # a Policy or an _ArtifactModel: what evaluate_policy plays with
    spaces: tuple[Any, Any] | None
    if target.is_dir():
        source = load_unfinished_run(target) if is_unfinished_run(target) else target
        policy, _, config = resolve_source(source)
        assert config is not None  # an agent directory or a run's checkpoint: it has its training config
        env_id = args.env or config["env"]
        spaces, model = (policy.observation_space, policy.action_space), policy  # masks and state as predict has them
    elif target.suffix == ".tflite" and target.is_file():
        meta_path = target.with_name(target.name + ".metadata.json")
        if not meta_path.is_file():
            raise ValueError(f"ARTIFACT: expected {meta_path.name} beside {target.name}, found none")
        runner = TFLiteRunner(target)  # reads and checks the metadata beside it, its spaces built
        metadata = runner.metadata or {}
        model = _ArtifactModel(runner, runner.observation_space)
        spaces = (runner.observation_space, runner.action_space) if runner.action_space is not None else None
        env_id = args.env or (metadata.get("training_config") or {}).get("env")
        if env_id is None:
            raise ValueError("--env: expected a gymnasium id (the artifact's metadata names no training env)")
    else:
        raise ValueError(
            f"RUN_DIR|ARTIFACT: expected a run directory, an agent directory or a .tflite file, got {str(target)!r}"
        )
    env_id = gym_id(env_id, "env")
    args.start_work()
    returns = _gym_returns(model, env_id, args.episodes, args.seed, spaces)
    print(f"{env_id}: {np.mean(returns):.2f} +- {np.std(returns):.2f} over {args.episodes} episodes")
    return 0
