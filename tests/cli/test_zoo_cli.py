"""`kppo train ZOO_FILE --env ID` and `kppo train zoo/<env id>`: RL-Zoo's files as rl-zoo3's train.py reads them, the
run recording the entry it came from; the bundled configs/zoo/ entries resolve by name."""

from pathlib import Path

import pytest
import yaml

from kppo.cli.configs import CONFIG_DIR, bundled_names, config_path, load_config
from kppo.cli.main import main
from kppo.config.zoo import RETIRED_IDS

ZOO = Path(__file__).resolve().parents[1] / "fixtures" / "zoo" / "ppo.yml"


def test_a_zoo_file_without_env_lists_its_entries_in_one_line(capsys):
    assert main(["train", str(ZOO), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "name one with --env" in err
    assert "'Pendulum-v1'" in err and "'HalfCheetah-v4'" in err


def test_env_is_only_for_a_zoo_file(capsys):
    assert main(["train", "cartpole", "--env", "CartPole-v1", "--quiet"]) == 2
    assert "--env: only an RL-Zoo file's entry is chosen so" in capsys.readouterr().err


def test_the_bundled_zoo_entries_resolve_by_name():
    names = [name for name in bundled_names() if name.startswith("zoo/")]
    assert {"zoo/Pendulum-v1", "zoo/CartPole-v1", "zoo/HalfCheetah-v4", "zoo/LunarLanderContinuous-v3"} <= set(names)
    full = yaml.safe_load(ZOO.read_text())
    retired = {new: old for old, new in RETIRED_IDS.items()}  # LunarLander-v3.yml holds the LunarLander-v2 entry
    assert set(retired) <= {name.removeprefix("zoo/") for name in names}
    for name in names:
        env = name.removeprefix("zoo/")
        key = retired.get(env, env)
        path = config_path(name)
        assert path == CONFIG_DIR / "zoo" / f"{env}.yml" and "rl-baselines3-zoo" in path.read_text()
        assert yaml.safe_load(path.read_text()) == {key: full[key]}  # the zoo's entry, unedited
        assert load_config(name, [], None).env == env


def test_train_a_zoo_entry_end_to_end(tmp_path):
    run = tmp_path / "run"
    # CartPole-v1 as the zoo gives it (8 envs x 32 steps, batch_size 256, lin_ schedules), two rollouts only
    args = ["train", str(ZOO), "--env", "CartPole-v1", "--set", "n_timesteps=512", "--out", str(run)]
    assert main([*args, "--quiet", "--no-export"]) == 0
    record = yaml.safe_load((run / "zoo.yaml").read_text())
    assert (record["file"], record["entry"], record["env"]) == (str(ZOO), "CartPole-v1", "CartPole-v1")
    assert record["settings"]["batch_size"] == 256 and record["settings"]["learning_rate"] == "lin_0.001"
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert (config["num_envs"], config["num_steps"], config["num_minibatches"], config["total_timesteps"]) == (
        8,
        32,
        1,
        512,
    )
    assert (config["adam_style"], config["lr_schedule"], config["clip_range_vf"]) == ("torch", "linear", None)
    assert (run / "agent").is_dir() and (run / "metrics.csv").is_file()


@pytest.mark.parametrize("rollout, batch_size, warns", [(8, 256, False), (64, 64, False), (256, 100, True)])
def test_the_minibatch_warning_speaks_only_where_sb3_differs(rollout, batch_size, warns, recwarn):
    # MountainCarContinuous: batch_size 256 of a rollout of 8 is one minibatch of 8 in SB3 too.
    from kppo.config.spellings import minibatch_count

    minibatch_count(batch_size, rollout)
    assert any("truncated mini-batch" in str(w.message) for w in recwarn) == warns


def test_a_population_from_a_zoo_entry_writes_zoo_yaml_in_each_member(tmp_path):
    run = tmp_path / "run"
    args = ["train", str(ZOO), "--env", "CartPole-v1", "--seeds", "0-1", "--set", "n_timesteps=256", "--out", str(run)]
    assert main([*args, "--quiet", "--no-export"]) == 0
    records = [yaml.safe_load((run / "members" / f"seed{seed}" / "zoo.yaml").read_text()) for seed in (0, 1)]
    assert records[0] == records[1] == yaml.safe_load((run / "zoo.yaml").read_text())
    assert (records[0]["file"], records[0]["entry"], records[0]["env"]) == (str(ZOO), "CartPole-v1", "CartPole-v1")


# a population from a config writes no zoo.yaml: tests/cli/test_population.py's population run checks it (one training)


@pytest.mark.parametrize(("name", "steps", "trained"), [("n_timesteps", 1, 256), ("total_timesteps", 300, 512)])
def test_set_n_timesteps_on_a_zoo_entry_counts_whole_rollouts_as_sb3_learn(name, steps, trained):
    # rl-zoo3's `-n 1` and SB3's learn(total_timesteps=1) train one whole rollout (CartPole's entry: 8 envs x 32 steps)
    config = load_config(str(ZOO), [f"{name}={steps}"], None, env="CartPole-v1")
    assert (config.rollout_size, config.total_timesteps) == (256, trained)
    with pytest.raises(ValueError, match=r"--set n_timesteps: .*int"):
        load_config(str(ZOO), ["n_timesteps=many"], None, env="CartPole-v1")
