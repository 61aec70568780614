"""`kppo train | eval | export` end to end with tiny budgets, and its errors. Tests that need the same trained run
share it (module fixtures), each working on its own copy where it writes."""

import contextlib
import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kppo.cli.main import main

TINY = [
    "--set",
    "total_timesteps=1024",
    "--set",
    "num_envs=4",
    "--set",
    "num_steps=64",
    "--set",
    "eval_freq=2",
    "--set",
    "num_eval_envs=2",
    "--quiet",
]


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    """`kppo train cartpole --seed 3` with TINY's budget (policy.tflite exported): read it, or copy it to write."""
    run = tmp_path_factory.mktemp("cartpole") / "run"
    assert main(["train", "cartpole", "--seed", "3", "--out", str(run), *TINY]) == 0
    return run


@pytest.fixture(scope="module")
def lake_run(tmp_path_factory):
    """FrozenLake (a discrete observation) with TINY's budget and eval_freq 100, above its 4 iterations: the run
    directory and what `kppo train` wrote on stderr."""
    run = tmp_path_factory.mktemp("lake") / "lake"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["train", "--set", "env=FrozenLake-v1", "--out", str(run), *TINY, "--set", "eval_freq=100"]) == 0
    return run, err.getvalue()


def test_train_eval_export_end_to_end(cartpole_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(cartpole_run, run)  # this test writes exports into it and breaks its metadata
    for name in (
        "config.yaml",
        "metrics.csv",
        "learning_curve.png",
        "policy.tflite",
        "policy.tflite.metadata.json",
        "summary.json",
        "agent/config.yaml",
        "agent/metadata.json",
    ):
        assert (run / name).exists(), name
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["seed"] == 3 and summary["total_steps"] == 1024 and summary["artifact"]["parity_max_error"] == 0
    header = (run / "metrics.csv").read_text().splitlines()
    assert "eval/mean_returns" in header[0] and len(header) == 3  # header + 2 rounds
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "3"]) == 0
    agent_line = capsys.readouterr().out
    assert main(["eval", str(run / "policy.tflite"), "--episodes", "3"]) == 0
    assert capsys.readouterr().out == agent_line  # the artifact plays exactly like the agent
    assert main(["export", str(run), "--quantize", "int8"]) == 0
    assert (run / "policy_int8.tflite").exists()
    assert main(["export", str(run), "--format", "saved_model", "--batch-size", "0"]) == 0
    assert (run / "policy" / "saved_model.pb").exists()
    capsys.readouterr()
    # an env whose spaces differ from the agent's: said before any episode, not an `obs:` shape error mid-episode
    assert main(["eval", str(run), "--env", "Pendulum-v1", "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "kppo eval: error: --env: expected an env with the agent's spaces (observation Box(4,), action "
        "Discrete(2)), got 'Pendulum-v1' with observation Box(3,), action Box(1,)\n"
    )
    (run / "policy.tflite.metadata.json").write_text("{")
    assert main(["eval", str(run / "policy.tflite")]) == 2
    err = capsys.readouterr().err
    assert "policy.tflite.metadata.json: expected JSON, got Expecting property name" in err
    assert err.count("\n") == 1


def test_overrides_accept_every_spelling(tmp_path):
    from kppo.cli.configs import load_config

    config = load_config("pendulum", ["LR=1e-3", "n_envs=8", "squash=false", "actor_hidden_units=[32, 16]"], 5)
    assert (config.learning_rate, config.num_envs, config.squash, config.actor_hidden_units, config.seed) == (
        1e-3,
        8,
        False,
        (32, 16),
        5,
    )


def test_integer_overrides_in_scientific_notation():
    from kppo.cli.configs import load_config

    # YAML 1.1 reads `1e5` (no dot) as a string; `5e5` and `1.0e+5` are accepted as integral numbers too
    assert load_config(None, ["total_timesteps=1e5"], None).total_timesteps == 100_000
    assert load_config("cartpole", ["n_timesteps=5e5", "num_envs=8.0"], None).total_timesteps == 500_000
    with pytest.raises(ValueError, match=r"^total_timesteps: expected an integer, got 100000.5$"):
        load_config(None, ["total_timesteps=100000.5"], None)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "nope"], "CONFIG: expected a YAML file or one of"),
        (["train", "--set", "learning_rate"], "--set: expected name=value"),
        (["train", "--set", "num_envs=0"], "num_envs: expected an integer >= 1, got 0"),
        (["train", "--set", "colour=blue"], "unknown option 'colour'"),
        (["eval", "/nonexistent"], "RUN_DIR|ARTIFACT: expected a run directory"),
        (["export", "/nonexistent"], "path: expected a kppo agent directory"),
        (
            ["train", "--set", "learning_rat=0.1"],
            "unknown option 'learning_rat' (not a kppo, rex or SB3 name; did you mean 'learning_rate'?)",
        ),
        (
            ["train", "--set", "env=CartPol-v1"],
            "env: expected a built-in task or a registered gymnasium id, got "
            "'CartPol-v1' (Environment `CartPol` doesn't exist.",
        ),
        (["train", "--set", "total_timesteps=-5"], "total_timesteps: expected at least one rollout"),
        (["train", "--seed", "-1"], "seed: expected an integer >= 0, got -1"),
        (["eval", "/nonexistent", "--episodes", "0"], "--episodes: expected an integer >= 1, got 0"),
        (
            ["eval", "/nonexistent", "--env", "Nope-v0"],
            "--env: expected a built-in task or a registered gymnasium id, got 'Nope-v0'",
        ),
    ],
)
def test_bad_input_is_one_line_on_stderr(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bad_yaml_config(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_envs: [4\n")
    assert main(["train", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"kppo train: error: config YAML {str(bad)!r}: could not parse at line 2, column 1: ")
    assert "<unicode string>" not in err and err.count("\n") == 1
    bad.write_bytes(b"\xff\xfen\x00u\x00m\x00")
    assert main(["train", str(bad)]) == 2
    assert capsys.readouterr().err == (
        f"kppo train: error: config YAML {str(bad)!r}: expected UTF-8 text, got byte 0xff at offset 0\n"
    )


def test_out_that_is_a_file_is_one_line(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["train", "--out", str(taken), *TINY]) == 2
    assert (
        capsys.readouterr().err
        == f"kppo train: error: --out: expected a directory, got {str(taken)!r} (an existing file)\n"
    )
    assert main(["train", "--out", str(taken / "run"), *TINY]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(
            f"kppo train: error: --out: expected a directory kppo can create and write, got {str(taken / 'run')!r} ("
        )
        and err.count("\n") == 1
    )


def test_eval_freq_above_the_iterations_warns_once_and_evaluates_each_iteration(lake_run):
    run, err = lake_run  # 1024 steps of 4 x 64 = 4 iterations; eval_freq 100 used to be refused
    line = (
        "kppo train: warning: eval_freq: 100 evaluation rounds asked for, but the run has only 4 iterations "
        "(total_timesteps // rollout_size): evaluating after each\n"
    )
    assert err.count(line) == 1
    assert len((run / "metrics.csv").read_text().splitlines()) == 1 + 4
    assert "eval_freq: 100" in (run / "config.yaml").read_text()  # kept as given


def test_an_interrupted_run_can_be_evaluated_and_exported(tmp_path, capsys):
    import kppo
    from kppo.config.options import Config
    from kppo.training.resume import load_run_checkpoint

    run = tmp_path / "run"  # what `kppo train` leaves after SIGTERM: config.yaml and checkpoints/, no agent/
    config = Config(
        num_envs=4, num_steps=64, total_timesteps=4 * 64 * 8, eval_freq=2, num_eval_envs=2, iterations_per_call=2
    )
    run.mkdir()
    config.to_yaml(run / "config.yaml")
    result = kppo.train(config=config, checkpoint_dir=run / "checkpoints", should_stop=lambda: True)
    assert result.interrupted and int(result.runner_state.iteration) == 2 and not (run / "agent").exists()
    saved = load_run_checkpoint(run)
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    np.testing.assert_array_equal(saved.policy.get_action(obs), result.policy.get_action(obs))
    line = f"using checkpoint {run / 'checkpoints' / 'ckpt-2'} (iteration 2 of 8; the run did not finish)\n"
    capsys.readouterr()
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(line) and "CartPole-v1: " in out
    assert main(["export", str(run)]) == 0
    assert capsys.readouterr().out.startswith(line)
    metadata = json.loads((run / "policy.tflite.metadata.json").read_text())
    assert metadata["parity"]["max_error"] == 0 and metadata["training_config"]["env"] == "CartPole-v1"
    assert main(["eval", str(run / "policy.tflite"), "--episodes", "2"]) == 0
    # checkpoints that do not fit the run's config: one line saying so, not "expected a kppo agent directory"
    config.replace(num_hidden_units=32).to_yaml(run / "config.yaml")
    capsys.readouterr()
    assert main(["eval", str(run)]) == 2
    assert capsys.readouterr().err == (
        f"kppo eval: error: {run / 'config.yaml'}: expected the networks of the checkpoints in "
        f"{str(run / 'checkpoints')!r}, got num_hidden_units=32, a width none of their variables has\n"
    )
    # the widths are theirs, the layer count is not: the restore itself says so, still in one line
    config.replace(num_hidden_layers=config.num_hidden_layers + 1).to_yaml(run / "config.yaml")
    assert main(["eval", str(run)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(
            f"kppo eval: error: checkpoints: expected a checkpoint in {str(run / 'checkpoints')!r} that "
            f"fits {str(run / 'config.yaml')!r}, got 1 unreadable (checkpoint "
        )
        and err.count("\n") == 1
    )
    for path in (run / "checkpoints").iterdir():
        path.unlink()
    assert main(["export", str(run)]) == 2
    assert capsys.readouterr().err == (
        f"kppo export: error: checkpoints: expected a checkpoint in "
        f"{str(run / 'checkpoints')!r} that fits {str(run / 'config.yaml')!r}, got none\n"
    )


def test_help_imports_no_tensorflow_and_lists_every_field():
    """`kppo --help` and each command's --help answer from the parser alone (argparse and the config fields), and
    `python -m kppo.cli.main train --help` lists every config field: one fresh process for both."""
    code = (
        "import contextlib, io, runpy, sys\n"
        "from kppo.cli.main import main\n"
        "for argv in ([], ['train'], ['eval'], ['export'], ['tune']):\n"
        "    try:\n"
        "        with contextlib.redirect_stdout(io.StringIO()):\n"
        "            main([*argv, '--help'])\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code == 0, (argv, exit.code)\n"
        "assert 'tensorflow' not in sys.modules, 'kppo --help imported TensorFlow'\n"
        "sys.argv = ['kppo', 'train', '--help']\n"
        "runpy.run_module('kppo.cli.main', run_name='__main__', alter_sys=True)  # what `python -m` runs\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    from kppo.config.options import Config

    for name in Config.field_docs():
        assert name in out.stdout, name


def _start_training(run, extra=()):
    import os

    cmd = [
        sys.executable,
        "-m",
        "kppo.cli.main",
        "train",
        "cartpole",
        "--out",
        str(run),
        "--quiet",
        "--no-export",
        "--set",
        "total_timesteps=2000000",
        "--set",
        "num_envs=4",  # a small rollout and update: the test needs checkpoints, not learning
        "--set",
        "num_steps=32",
        "--set",
        "num_epochs=1",
        "--set",
        "jit_rollout=false",  # no XLA compile before the first checkpoint: the signals are what is tested
        "--set",
        "checkpoint_every=16",
        "--set",
        "iterations_per_call=4",
        *extra,
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )


def _wait_for_checkpoint(run, proc, timeout=180):
    import time

    deadline = time.time() + timeout
    while time.time() < deadline:
        if list((run / "checkpoints").glob("ckpt-*.index")):
            return
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.5)
    raise AssertionError("no checkpoint appeared")


# SIGKILL: slow (suite budget); tests/training/test_kills.py's slow tests kill `kppo train` 50 times and compare every
# file with an uninterrupted run's
@pytest.mark.parametrize("sig", ["SIGTERM", pytest.param("SIGKILL", marks=pytest.mark.slow)])
def test_a_killed_run_resumes_from_its_latest_checkpoint(sig, tmp_path, capsys):
    import signal

    from kppo.training.checkpointer import TrainingCheckpointer
    from kppo.config.options import Config
    from kppo.training.runners import make_runner

    run = tmp_path / "run"
    proc = _start_training(run)
    _wait_for_checkpoint(run, proc)
    proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=120)
    if sig == "SIGTERM":
        assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    else:
        assert proc.returncode == -signal.SIGKILL
    # the newest checkpoint loads into a fresh process's networks; a SIGKILL loses at most one interval
    config = Config.from_yaml(run / "config.yaml")
    runner = make_runner(None, config)
    restored = TrainingCheckpointer(run / "checkpoints", runner.agent, runner.state).restore_latest()
    assert restored is not None and int(restored[0].iteration) >= 16
    assert np.all(np.isfinite(runner.agent.actor.trainable_variables[0].numpy()))
    # and `kppo eval` plays the newest checkpoint (there is no agent/ yet)
    assert not (run / "agent").exists()
    assert main(["eval", str(run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"using checkpoint {run / 'checkpoints' / 'ckpt-'}") and "the run did not finish" in out


def test_resume_through_the_cli(cartpole_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(cartpole_run, run)
    first = json.loads((run / "summary.json").read_text())
    assert main(["train", "--resume", str(run), "--quiet", "--no-export"]) == 0  # already complete: no new steps
    again = json.loads((run / "summary.json").read_text())
    assert again["total_steps"] == first["total_steps"]
    assert again["final_eval_mean_return"] == first["final_eval_mean_return"]
    assert main(["train", "cartpole", "--resume", str(run)]) == 2
    assert "--resume: expected no CONFIG" in capsys.readouterr().err


def test_a_discrete_observation_artifact_is_evaluated_on_raw_integers(lake_run, capsys):
    """FrozenLake: the artifact takes the raw state index (one-hot inside); `kppo eval` feeds it the env's integers."""
    run, _ = lake_run
    capsys.readouterr()
    assert main(["eval", str(run / "policy.tflite"), "--episodes", "2"]) == 0
    assert capsys.readouterr().out.startswith("FrozenLake-v1: ")


def test_eval_plays_recurrent_and_masked_agents_and_artifacts_as_predict_does(tmp_path, capsys):
    """`kppo eval` carries a recurrent policy's state and gives a masked one the env's masks, for agent directories
    and for their artifacts alike (the same returns)."""
    import functools

    import gymnasium as gym

    import kppo
    from tests.helpers.masked_envs import MaskedChoiceEnv

    lstm = kppo.RecurrentPPO(
        "MlpLstmPolicy",
        "CartPole-v1",
        n_steps=32,
        batch_size=32,
        n_epochs=1,
        seed=0,
        policy_kwargs=dict(lstm_hidden_size=8, net_arch=[8]),
    )
    lstm.save(tmp_path / "lstm")
    kppo.export(tmp_path / "lstm", tmp_path / "lstm.tflite")
    outputs = []
    for target in ("lstm", "lstm.tflite"):
        assert main(["eval", str(tmp_path / target), "--env", "CartPole-v1", "--episodes", "2"]) == 0
        outputs.append(capsys.readouterr().out.strip().splitlines()[-1])
    assert outputs[0] == outputs[1] and outputs[0].startswith("CartPole-v1: ")
    gym_id = "KppoMaskedChoice-v0"
    if gym_id not in gym.registry:
        gym.register(gym_id, entry_point=functools.partial(MaskedChoiceEnv, source="info"), max_episode_steps=16)
    masked = kppo.MaskablePPO("MlpPolicy", gym_id, n_steps=64, batch_size=64, n_epochs=1, seed=0)
    masked.save(tmp_path / "masked")
    kppo.export(tmp_path / "masked", tmp_path / "masked.tflite")
    for target in ("masked", "masked.tflite"):
        assert main(["eval", str(tmp_path / target), "--env", gym_id, "--episodes", "2"]) == 0
        mean = float(capsys.readouterr().out.strip().splitlines()[-1].split(": ")[1].split(" +- ")[0])
        assert mean >= 0.0  # -1 per masked action: none taken
