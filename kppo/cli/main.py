"""`kppo train | eval | export | tune`: YAML configs + dotted overrides -> Config -> train -> a run directory.

    kppo train                                  # the default example: TF-native CartPole, exports policy.tflite
    kppo train pendulum --set learning_rate=3e-4 --seed 1 --out runs/p1
    kppo eval runs/p1 --episodes 20             # or an artifact: kppo eval runs/p1/policy.tflite
    kppo export runs/p1 --format tflite --quantize int8
    kppo export model.zip --vecnormalize vec_normalize.pkl --quantize int8 --out p.tflite   # an SB3 save
    kppo eval model.zip --env CartPole-v1       # an SB3 save: --env names its env
    kppo train cartpole --seeds 0-7 --sweep learning_rate=3e-4,1e-3   # 16 agents in one compiled program
    kppo tune cartpole --space space.yaml --trials 16 --batch 8   # a search; 8 trials a compiled population

A run directory holds config.yaml, agent/ (networks, optimizer and statistics; no pickle), metrics.csv,
tensorboard/, learning_curve.png, policy.tflite + policy.tflite.metadata.json, summary.json. `eval` and `export`
of a run that stopped before writing agent/ (interrupted, killed) use its newest readable checkpoint.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import yaml

from kppo.cli.runs import printable
from kppo.cli.tune import add_tune_parser


def _config_dir() -> Path:
    """The tuned configs: `kppo/configs/` inside an installed wheel, the checkout's top-level `configs/` otherwise."""
    package = Path(__file__).resolve().parents[1]
    installed = package / "configs"
    return installed if installed.is_dir() else package.parent / "configs"


CONFIG_DIR = _config_dir()


def _config_help() -> str:
    from kppo.config.options import Config

    docs = Config.field_docs()
    defaults = Config().to_dict()
    width = max(len(name) for name in docs)
    lines = ["config fields (set with --set name=value; rex and SB3 spellings also work):"]
    lines += [f"  {name:<{width}}  {docs[name]} Default: {defaults[name]!r}." for name in docs]
    return "\n".join(lines)


def parse_value(option: str, text: str) -> Any:
    """A command-line value (--set NAME=VALUE, --sweep NAME=V1,V2) read as YAML, bounded as config files are
    (`load_yaml`); a one-line error naming `option` when it is not YAML."""
    from kppo.config.options import load_yaml  # the loader Config.from_yaml reads files with

    try:
        return load_yaml(text)
    except yaml.YAMLError:
        raise ValueError(f"{option}: could not parse the value {text!r}") from None


def load_config(spec: Any, overrides: list[str], seed: int | None):
    """CONFIG (None: the default example; a YAML file; a name from configs/; or a Config) with --set and --seed; a
    gymnasium env id is checked to be registered."""
    from kppo.config.options import Config

    if isinstance(spec, Config):
        config = spec
    elif spec is None:
        config = Config(verbose=0)
    elif spec.endswith((".yaml", ".yml")) or Path(spec).is_file():
        config = Config.from_yaml(Path(spec))
    else:
        path = CONFIG_DIR / f"{spec}.yaml"
        if not path.is_file():
            names = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
            raise ValueError(f"CONFIG: expected a YAML file or one of {names}, got {spec!r}")
        config = Config.from_yaml(path)
    changes: dict[str, Any] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set: expected name=value, got {item!r}")
        changes[key.strip()] = parse_value(f"--set {printable(key)}", value)
    if seed is not None:
        changes["seed"] = seed
    config = config.replace(**changes) if changes else config
    if config.env_backend != "native":  # said now, not by the first trial or member that builds it
        _gym_id(config.env, "env")
    return config


def _gym_id(env_id: str, option: str) -> str:
    """The gymnasium id of a built-in task name or a registered id; a one-line error naming `option` otherwise."""
    import gymnasium as gym

    from kppo.envs import resolve_name

    try:
        return resolve_name(env_id)
    except ValueError:
        pass
    try:
        gym.spec(env_id)
    except (gym.error.Error, ImportError) as err:
        raise ValueError(
            f"{option}: expected a built-in task or a registered gymnasium id, got {env_id!r} ({printable(str(err))})"
        ) from None
    return env_id


def cmd_train(args) -> int:
    import kppo
    from kppo.agent import checkpoint
    from kppo.cli import population as cli_population, reporting
    from kppo.cli.runs import TrainingProgress, stop_on_signals, writable_dir
    from kppo.config.options import Config

    if args.seeds or args.sweep or (args.resume and cli_population.is_population_run(Path(args.resume))):
        return cli_population.train_population(args, load_config)
    if args.resume:
        out = Path(args.resume)
        if args.config or args.set or args.seed is not None:
            raise ValueError("--resume: expected no CONFIG, --set or --seed (the run's config.yaml is used)")
        if not (out / "config.yaml").is_file() or not (out / "checkpoints").is_dir():
            raise ValueError(f"--resume: expected a run directory with config.yaml and checkpoints/, got {str(out)!r}")
        config = Config.from_yaml(out / "config.yaml")
    else:
        config = load_config(args.config, args.set, args.seed)
        default = Path("runs") / f"{config.env}-seed{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
        out = writable_dir(Path(args.out) if args.out else default, "--out")
        config.to_yaml(out / "config.yaml")
    args.start_work()
    received = stop_on_signals()
    progress = TrainingProgress(config.num_iterations * config.rollout_size, args.quiet)
    rows: list[dict] = []

    def on_eval(row: dict) -> None:  # every round ends with a checkpoint: refresh the curve with it
        progress.evaluated(row)
        rows.append(row)
        metrics = {name: np.asarray([r[name] for r in rows]) for name in row}
        reporting.plot_learning_curve(out / "learning_curve.png", metrics, f"{config.env}, seed {config.seed}")

    try:
        result = kppo.train(
            config=config,
            on_eval=on_eval,
            on_progress=progress.steps,
            checkpoint_dir=out / "checkpoints",
            resume=bool(args.resume),
            should_stop=lambda: "signal" in received,
        )
    finally:
        progress.close()
    assert isinstance(result, kppo.PPOResult)  # one seed: one run
    if result.interrupted:
        step = int(result.runner_state.iteration) * config.rollout_size
        print(f"interrupted at step {step:,}: checkpoint written; continue with `kppo train --resume {out}`")
        return 128 + received["signal"]
    stats = result.runner_state.rollout
    checkpoint.save(
        out / "agent",
        config,
        result.agent,
        stats.obs_stats,
        stats.return_stats,
        result.observation_space,
        result.action_space,
    )
    reporting.write_metrics_csv(out / "metrics.csv", result.metrics)
    reporting.write_tensorboard(out / "tensorboard", result.metrics)
    reporting.plot_learning_curve(
        out / "learning_curve.png", result.metrics, f"{config.env}, seed {config.seed}"
    )  # incl. rows restored by --resume
    extra = {}
    if not args.no_export:
        exported = kppo.export(result, out / "policy.tflite")
        extra["artifact"] = {"path": str(exported.path), "parity_max_error": exported.metadata["parity"]["max_error"]}
    summary = reporting.write_summary(out / "summary.json", result, extra)
    print(
        f"{config.env}: final eval {summary['final_eval_mean_return']:.1f} +- {summary['final_eval_std_return']:.1f}"
        f" after {summary['total_steps']:,} steps in {summary['wall_total_s']:.1f} s -> {out}"
    )
    return 0


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


def _is_unfinished_run(path: Path) -> bool:
    """A run directory without agent/ (interrupted or killed) whose checkpoints `load_run_checkpoint` reads."""
    return (
        path.is_dir()
        and not (path / "agent").is_dir()
        and not (path / "metadata.json").is_file()
        and (path / "config.yaml").is_file()
        and (path / "checkpoints").is_dir()
    )


def _load_unfinished_run(path: Path):
    """The agent of the run's newest readable checkpoint, saying which one on stdout."""
    from kppo.training.resume import load_run_checkpoint

    saved = load_run_checkpoint(path)
    meta = saved.metadata
    state = "the run did not finish" if meta["iteration"] < meta["num_iterations"] else "the run wrote no agent/"
    print(f"using checkpoint {meta['checkpoint']} (iteration {meta['iteration']} of {meta['num_iterations']}; {state})")
    return saved


def cmd_eval(args) -> int:
    from kppo.exporter.artifact import resolve_source
    from kppo.exporter.runner import TFLiteRunner

    if args.episodes < 1:
        raise ValueError(f"--episodes: expected an integer >= 1, got {args.episodes}")
    if not 0 <= args.seed < 2**32:  # what gymnasium's reset(seed=) takes
        raise ValueError(f"--seed: expected an integer from 0 to 2**32 - 1, got {args.seed}")
    if args.env:
        args.env = _gym_id(args.env, "--env")
    target = Path(args.target)
    if target.is_dir() and (target / "agent").is_dir():
        target = target / "agent"
    sb3_model = _sb3_model(target, args.vecnormalize) if target.suffix != ".tflite" else None
    if sb3_model is not None:  # a zip Stable-Baselines3 saved: it names no env
        if not args.env:
            raise ValueError("--env: expected a gymnasium id for an SB3 save (SB3's zip names no env)")
        args.start_work()
        returns = _gym_returns(sb3_model.kppo_policy, args.env, args.episodes, args.seed, sb3_model._model_spaces())
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
        source = _load_unfinished_run(target) if _is_unfinished_run(target) else target
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
    env_id = _gym_id(env_id, "env")
    args.start_work()
    returns = _gym_returns(model, env_id, args.episodes, args.seed, spaces)
    print(f"{env_id}: {np.mean(returns):.2f} +- {np.std(returns):.2f} over {args.episodes} episodes")
    return 0


def _sb3_model(path: Path, vecnormalize: str | None):
    """The kppo model of a zip Stable-Baselines3 saved (its class from the save), with `vecnormalize`'s statistics
    frozen in; None for anything else."""
    import kppo
    from kppo.sb3.saves.sb3_save import is_sb3_save, read_sb3_save

    if not is_sb3_save(path):
        return None
    model = getattr(kppo, read_sb3_save(path).algorithm).load(path)
    if vecnormalize:
        model.use_vec_normalize(vecnormalize)
    return model


def cmd_export(args) -> int:
    import kppo
    from kppo.agent.checkpoint import read_metadata
    from kppo.cli.runs import writable_dir

    if args.batch_size < 0:
        raise ValueError(f"--batch-size: expected an integer >= 0 (0: a dynamic batch), got {args.batch_size}")
    source: Any = Path(args.run)
    quantize = None if args.quantize in (None, "none", "float32") else args.quantize
    default = f"policy{'' if quantize is None else '_' + quantize}" + (".tflite" if args.format == "tflite" else "")
    sb3_model = _sb3_model(source, args.vecnormalize)
    if sb3_model is None and args.vecnormalize:
        raise ValueError("--vecnormalize: only for a zip Stable-Baselines3 saved (kppo's runs hold their statistics)")
    if (source / "agent").is_dir():
        source = source / "agent"
    unfinished = sb3_model is None and _is_unfinished_run(source)
    if sb3_model is None and not unfinished:
        read_metadata(source)  # the one-line error for a directory that is neither an agent nor a run
    beside = Path(args.run).with_name(f"{Path(args.run).stem}_{default}") if sb3_model is not None else None
    out = Path(args.out) if args.out else (beside or Path(args.run) / default)
    writable_dir(out.parent, "--out")
    if unfinished:
        source = _load_unfinished_run(source)
    if sb3_model is not None:
        source = sb3_model
    args.start_work()
    exported = kppo.export(
        source, out, format=args.format, quantize=quantize, batch_size=None if args.batch_size == 0 else args.batch_size
    )
    parity = exported.metadata["parity"]
    print(
        f"wrote {exported.path} ({exported.metadata['size_bytes']:,} bytes; parity max error {parity['max_error']:.2e}"
        f" on {parity['observations']} observations) and {exported.metadata_path.name}"
    )
    return 0


def cmd_tune(args) -> int:
    from kppo.cli.tune import run_tune

    return run_tune(args, load_config)


class _Parser(argparse.ArgumentParser):
    """argparse with kppo's one-line errors: `kppo <command>: error: <message>` and a pointer to --help on stderr,
    exit status 2 (argparse's own print the usage first, several lines); --help is argparse's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}  # the root parser's: command -> its parser

    def error(self, message: str) -> NoReturn:
        shown = printable(message)  # an argument's text, a line break in it included, stays on the line
        print(f"{self.prog}: error: {shown} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """As argparse's, with unrecognized arguments refused by the command they were given to, quoted."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self.commands.get(str(getattr(parsed, "command", "")), self)
            parser.error(f"unrecognized arguments: {' '.join(map(repr, extras))}")
        return parsed


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kppo", description="PPO for TensorFlow/Keras.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser(
        "train",
        help="train (default: TF-native CartPole) and export policy.tflite",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_config_help(),
    )
    train.add_argument("config", nargs="?", help="a YAML file or a task name from configs/ (e.g. cartpole, pendulum)")
    train.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a config field")
    train.add_argument("--seed", type=int)
    train.add_argument("--seeds", metavar="LIST", help="train a population in one program, e.g. 0-7 or 0,3,5")
    train.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="a per-member value grid (learning_rate, ent_coef, clip_range, gamma, gae_lambda, "
        "vf_coef, max_grad_norm); trained with every seed as one population",
    )
    train.add_argument("--out", help="run directory (default: runs/<env>-seed<N>-<time>)")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.add_argument("--no-export", action="store_true", help="skip policy.tflite")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue an interrupted run from its latest checkpoint")
    train.set_defaults(func=cmd_train)
    ev = sub.add_parser("eval", help="closed-loop episodes of a run, agent directory or .tflite artifact")
    ev.add_argument("target", metavar="RUN_DIR|ARTIFACT|SB3_ZIP")
    ev.add_argument("--episodes", type=int, default=10)
    ev.add_argument("--env", help="gymnasium id (default: the training env)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--vecnormalize", metavar="PKL", help="an SB3 save's vec_normalize.pkl (its statistics)")
    ev.set_defaults(func=cmd_eval)
    ex = sub.add_parser("export", help="export a run's agent as TFLite or SavedModel")
    ex.add_argument("run", metavar="RUN_DIR|SB3_ZIP")
    ex.add_argument("--format", choices=["tflite", "saved_model"], default="tflite")
    ex.add_argument("--quantize", choices=["none", "float16", "dynamic", "int8"], default="none")
    ex.add_argument("--batch-size", type=int, default=1, help="fixed input batch (0: dynamic)")
    ex.add_argument("--out")
    ex.add_argument("--vecnormalize", metavar="PKL", help="an SB3 save's vec_normalize.pkl: its statistics baked in")
    ex.set_defaults(func=cmd_export)
    add_tune_parser(sub, cmd_tune)
    parser.commands = dict(sub.choices)
    return parser


class _Warnings:
    """A command's warnings as one line each on stderr, like its errors (e.g. fewer evaluation rounds than
    eval_freq). They are held while the command checks its arguments and shown once its work starts
    (`args.start_work()`, which the commands call), so that a refused command prints its one error line only (a
    warning about a command that did not run is noise, e.g. Optuna's "experimental" one before a --pruner error)."""

    def __init__(self, command: str) -> None:
        self.command, self.live = command, False
        self.held: list[str] = []

    def show(self, message, category, filename, lineno, file=None, line=None) -> None:
        del category, filename, lineno, line
        text = f"kppo {self.command}: warning: {message}"
        if self.live:
            print(text, file=file or sys.stderr)
        else:
            self.held.append(text)

    def start(self) -> None:
        self.live = True
        for text in self.held:
            print(text, file=sys.stderr)
        self.held.clear()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    shown = _Warnings(args.command)
    args.start_work = shown.start
    with warnings.catch_warnings():  # restores the previous warning display on return
        warnings.showwarning = shown.show
        try:
            code = args.func(args)
        except (ValueError, FloatingPointError, OSError) as err:  # OSError: kppo's one-line write failures
            print(f"kppo {args.command}: error: {err}", file=sys.stderr)
            return 2
        shown.start()  # a command that returned without starting (nothing to do) still says its warnings
        return code


if __name__ == "__main__":
    sys.exit(main())
