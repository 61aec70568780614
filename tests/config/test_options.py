import dataclasses
from pathlib import Path

import pytest

import kppo

from kppo.config.options import ACTIVATIONS, KERNEL_INITS, Config

REX_FIELDS = [
    "LR",
    "NUM_ENVS",
    "NUM_STEPS",
    "TOTAL_TIMESTEPS",
    "UPDATE_EPOCHS",
    "NUM_MINIBATCHES",
    "GAMMA",
    "GAE_LAMBDA",
    "CLIP_EPS",
    "ENT_COEF",
    "VF_COEF",
    "MAX_GRAD_NORM",
    "NUM_HIDDEN_LAYERS",
    "NUM_HIDDEN_UNITS",
    "KERNEL_INIT_TYPE",
    "HIDDEN_ACTIVATION",
    "STATE_INDEPENDENT_STD",
    "SQUASH",
    "ANNEAL_LR",
    "NORMALIZE_ENV",
    "FIXED_INIT",
    "OFFSET_STEP",
    "NUM_EVAL_ENVS",
    "EVAL_FREQ",
    "VERBOSE",
    "DEBUG",
]


def test_defaults_are_the_fixed_cartpole_setting():
    c = Config()
    assert (c.num_envs, c.num_steps, c.total_timesteps, c.num_epochs, c.num_minibatches) == (16, 128, 500_000, 4, 4)
    assert (c.learning_rate, c.gamma, c.gae_lambda, c.clip_range, c.ent_coef, c.vf_coef, c.max_grad_norm) == (
        2.5e-4,
        0.99,
        0.95,
        0.2,
        0.01,
        0.5,
        0.5,
    )
    assert (c.clip_range_vf, c.vf_clip_mode) == (0.2, "max")  # rex's CLIP_EPS clips the value too
    assert (c.rollout_size, c.minibatch_size, c.num_iterations) == (2048, 512, 244)
    assert not any(f.name == "batch_size" for f in dataclasses.fields(Config))


def test_every_field_is_documented():
    docs = Config.field_docs()
    assert set(docs) == {f.name for f in dataclasses.fields(Config)}
    assert all(doc and "\n" not in doc for doc in docs.values())


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        Config().num_envs = 3


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"num_envs": 0}, "num_envs"),
        ({"num_envs": 2.5}, "num_envs"),
        ({"num_envs": True}, "num_envs"),
        ({"num_steps": -1}, "num_steps"),
        ({"learning_rate": -1e-3}, "learning_rate"),
        ({"learning_rate": float("nan")}, "learning_rate"),
        ({"learning_rate": "fast"}, "learning_rate"),
        ({"gamma": 1.5}, "gamma"),
        ({"gae_lambda": -0.1}, "gae_lambda"),
        ({"clip_range": 0.0}, "clip_range"),
        ({"clip_range_vf": -0.2}, "clip_range_vf"),
        ({"target_kl": 0.0}, "target_kl"),
        ({"ent_coef": -0.01}, "ent_coef"),
        ({"max_grad_norm": 0}, "max_grad_norm"),
        ({"activation": "sin"}, "activation"),
        ({"kernel_init": "zeros"}, "kernel_init"),
        ({"lr_schedule": "cosine"}, "lr_schedule"),
        ({"clip_schedule": "cosine"}, "clip_schedule"),
        ({"frame_stack": 0}, "frame_stack"),
        ({"vf_clip_mode": "min"}, "vf_clip_mode"),
        ({"num_minibatches": 3}, "num_minibatches"),
        ({"total_timesteps": 100}, "total_timesteps"),
        ({"eval_freq": 0}, "eval_freq"),
        ({"eval_freq": -1}, "eval_freq"),
        ({"total_timesteps": 100_000.5}, "total_timesteps"),
        ({"total_timesteps": "1e5.5"}, "total_timesteps"),
        ({"total_timesteps": -5}, "total_timesteps"),
        ({"seed": -1}, "seed"),
        ({"squash": "yes"}, "squash"),
        ({"verbose": 3}, "verbose"),
        ({"num_envs": 1, "num_steps": 1}, "num_envs * num_steps"),
    ],
)
def test_invalid_values_name_the_field(changes, field):
    with pytest.raises(ValueError) as err:
        Config(**changes)
    message = str(err.value)
    assert message.startswith(f"{field}: expected ")
    assert "got" in message and "\n" not in message


def test_a_clip_schedule_other_than_constant_or_linear_is_one_line_naming_field_expected_and_got():
    with pytest.raises(ValueError) as err:
        Config(clip_schedule="cosine")
    assert str(err.value) == "clip_schedule: expected one of ('constant', 'linear'), got 'cosine'"
    assert Config().clip_schedule == "constant"  # the default changes nothing


def test_unknown_key_is_named():
    with pytest.raises(ValueError, match="unknown option 'LEARNING_RATE'"):
        Config.from_dict({"LEARNING_RATE": 1e-3})


@pytest.mark.parametrize(
    "key, near",
    [("learning_rat", "learning_rate"), ("totaltimesteps", "total_timesteps"), ("n_env", "n_envs"), ("Gamma", "gamma")],
)
def test_unknown_key_near_a_real_one_suggests_it(key, near):
    with pytest.raises(ValueError, match=f"unknown option '{key}' .*; did you mean '{near}'\\?\\)$"):
        Config.from_dict({key: 1})
    with pytest.raises(ValueError, match=r"see kppo.Config"):  # nothing near: no guess
        Config.from_dict({"colour": 1})


def test_same_option_twice_is_an_error():
    with pytest.raises(ValueError, match="given twice"):
        Config.from_dict({"LR": 1e-3, "learning_rate": 1e-3})


def test_rex_spellings():
    rex = {
        "LR": 1e-3,
        "NUM_ENVS": 8,
        "NUM_STEPS": 64,
        "TOTAL_TIMESTEPS": 100_000,
        "UPDATE_EPOCHS": 10,
        "NUM_MINIBATCHES": 8,
        "GAMMA": 0.98,
        "GAE_LAMBDA": 0.9,
        "CLIP_EPS": 0.3,
        "ENT_COEF": 0.0,
        "VF_COEF": 1.0,
        "MAX_GRAD_NORM": 1.0,
        "NUM_HIDDEN_LAYERS": 3,
        "NUM_HIDDEN_UNITS": 32,
        "KERNEL_INIT_TYPE": "xavier_uniform",
        "HIDDEN_ACTIVATION": "relu",
        "STATE_INDEPENDENT_STD": False,
        "SQUASH": True,
        "ANNEAL_LR": False,
        "NORMALIZE_ENV": True,
        "FIXED_INIT": True,
        "OFFSET_STEP": True,
        "NUM_EVAL_ENVS": 4,
        "EVAL_FREQ": 5,
        "VERBOSE": True,
        "DEBUG": True,
    }
    assert set(rex) == set(REX_FIELDS)
    c = Config.from_dict(rex)
    assert c == Config(
        learning_rate=1e-3,
        num_envs=8,
        num_steps=64,
        total_timesteps=100_000,
        num_epochs=10,
        num_minibatches=8,
        gamma=0.98,
        gae_lambda=0.9,
        clip_range=0.3,
        clip_range_vf=0.3,
        ent_coef=0.0,
        vf_coef=1.0,
        max_grad_norm=1.0,
        num_hidden_layers=3,
        num_hidden_units=32,
        kernel_init="xavier_uniform",
        activation="relu",
        state_independent_std=False,
        squash=True,
        lr_schedule="constant",
        normalize_obs=True,
        normalize_reward=True,
        fixed_init=True,
        offset_step=True,
        num_eval_envs=4,
        eval_freq=5,
        verbose=1,
        debug=True,
    )


def test_rex_clip_eps_does_not_override_explicit_value_clip():
    assert Config.from_dict({"CLIP_EPS": 0.3, "clip_range_vf": None}).clip_range_vf is None


def test_sb3_spellings():
    c = Config.from_dict(
        {
            "n_envs": 8,
            "n_steps": 256,
            "batch_size": 64,
            "n_epochs": 10,
            "learning_rate": 3e-4,
            "gamma": 0.9,
            "gae_lambda": 0.95,
            "clip_range": 0.2,
            "clip_range_vf": 0.5,
            "normalize_advantage": False,
            "ent_coef": 0.0,
            "vf_coef": 0.5,
            "max_grad_norm": 0.5,
            "target_kl": 0.02,
            "log_std_init": -1.0,
            "squash_output": True,
            "normalize": True,
            "seed": 3,
            "verbose": 1,
            "n_timesteps": 100_000,
        }
    )
    assert (c.num_envs, c.num_steps, c.num_minibatches, c.minibatch_size) == (8, 256, 32, 64)
    assert (c.num_epochs, c.clip_range_vf, c.target_kl, c.log_std_init, c.squash) == (10, 0.5, 0.02, -1.0, True)
    assert c.normalize_obs and c.normalize_reward and not c.normalize_advantage and c.seed == 3


def test_rl_zoos_linear_schedules_read_as_the_value_and_its_schedule():
    # rl-zoo3 hyperparams/ppo.yml, atari: learning_rate: lin_2.5e-4, clip_range: lin_0.1
    c = Config.from_yaml("learning_rate: lin_2.5e-4\nclip_range: lin_0.1\n")
    assert (c.learning_rate, c.lr_schedule, c.clip_range, c.clip_schedule) == (2.5e-4, "linear", 0.1, "linear")
    assert Config.from_dict({"clip_range": 0.2}).clip_schedule == "constant"
    with pytest.raises(ValueError, match="learning_rate: expected a number or RL-Zoo's lin_<number>, got 'lin_x'"):
        Config.from_dict({"learning_rate": "lin_x"})
    with pytest.raises(ValueError, match="option 'clip_schedule' given twice"):
        Config.from_dict({"clip_range": "lin_0.1", "clip_schedule": "constant"})
    c = Config.from_yaml("ent_coef: lin_0.01\n")  # the entropy coefficient's schedule, spelled the same way
    assert (c.ent_coef, c.ent_schedule) == (0.01, "linear")
    assert Config.from_yaml(c.to_yaml()) == c
    with pytest.raises(ValueError, match="ent_schedule: expected one of"):
        Config(ent_schedule="cosine")


def test_sb3_batch_size_follows_kppo_ppos_rule_a_warning_and_equal_minibatches():
    with pytest.warns(UserWarning, match="mini-batch size of 100, .* kppo uses 32 equal minibatches of 64"):
        assert Config.from_dict({"batch_size": 100}).num_minibatches == 32  # 2048 = 20 x 100 + 48: SB3 warns too
    with pytest.raises(ValueError, match="batch_size: expected an integer >= 1, got 0"):
        Config.from_dict({"batch_size": 0})


def test_replace_reads_sb3_batch_size_against_this_configs_rollout():
    config = Config(num_envs=4, num_steps=64)  # 256 transitions a rollout
    assert config.replace(batch_size=64).num_minibatches == 4  # not 2048 / 64: the default rollout
    assert config.replace(batch_size=64, n_steps=128).num_minibatches == 8  # the rollout the change makes


@pytest.mark.parametrize("spelling", ["kppo", "rex", "sb3"])
def test_yaml_round_trip_is_lossless(spelling, tmp_path):
    base = {
        "kppo": {"learning_rate": 1e-3, "target_kl": 0.01, "squash": True},
        "rex": {"LR": 1e-3, "SQUASH": True, "ANNEAL_LR": False},
        "sb3": {"learning_rate": 1e-3, "n_steps": 64, "batch_size": 256, "clip_range_vf": None},
    }[spelling]
    c = Config.from_dict(base)
    path = tmp_path / "c.yaml"
    c.to_yaml(path)
    assert Config.from_yaml(path) == c
    assert Config.from_yaml(c.to_yaml()) == c


def test_yaml_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_envs: [1, 2\nlr: 3\n")
    with pytest.raises(ValueError, match="could not parse") as err:
        Config.from_yaml(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="expected an existing file"):
        Config.from_yaml(tmp_path / "missing.yaml")
    with pytest.raises(ValueError, match="expected a mapping"):
        Config.from_yaml("- 1\n- 2\n")


def test_yaml_syntax_error_names_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_envs: 4\nnum_steps: [64\n")
    with pytest.raises(ValueError) as err:
        Config.from_yaml(bad)
    message = str(err.value)
    assert message.startswith(f"config YAML {str(bad)!r}: could not parse at line 3, column 1: expected ',' or ']'")
    assert "(while parsing a flow sequence at line 2, column 12)" in message
    assert "<unicode string>" not in message and "\n" not in message
    with pytest.raises(
        ValueError, match=r"^config YAML text: could not parse at line 2, column 1: .* at line 1, column 12\)$"
    ):
        Config.from_yaml("num_steps: [64\n")
    bad.write_text("num_envs: 4\n\x00\n")  # PyYAML's reader error (no line mark)
    with pytest.raises(ValueError, match=f"^config YAML {str(bad)!r}: could not parse \\(unacceptable character"):
        Config.from_yaml(bad)


def test_yaml_file_that_is_not_a_mapping_or_not_text_is_named(tmp_path):
    listed = tmp_path / "list.yaml"
    listed.write_text("- num_envs: 4\n- num_steps: 64\n")
    with pytest.raises(
        ValueError, match=f"^config YAML {str(listed)!r}: expected a mapping of option: value, got list$"
    ):
        Config.from_yaml(listed)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfenum_envs: 4\n")  # UTF-16, or not text at all
    with pytest.raises(
        ValueError, match=f"^config YAML {str(binary)!r}: expected UTF-8 text, got byte 0xff at offset 0$"
    ):
        Config.from_yaml(binary)


def test_yaml_scientific_notation_without_dot():
    assert Config.from_yaml("learning_rate: 3e-4\n").learning_rate == 3e-4


@pytest.mark.parametrize(
    "text",
    [
        "total_timesteps: 1e6",
        "n_timesteps: 1e6",
        "n_timesteps: !!float 1e6",
        "TOTAL_TIMESTEPS: 1.0e6",
        "total_timesteps: 1000000.0",
        "total_timesteps: 1E+6",
    ],
)
def test_integer_fields_accept_integral_floats_and_scientific_notation(text):
    # RL-Zoo files write `n_timesteps: !!float 1e6`; PyYAML reads `1e6` (no dot) as the string "1e6"
    assert Config.from_yaml(text + "\n").total_timesteps == 1_000_000
    assert Config(total_timesteps="1e5").total_timesteps == 100_000  # `--set total_timesteps=1e5`
    assert Config(total_timesteps=1e5, num_envs=8.0).num_envs == 8
    assert isinstance(Config(total_timesteps=1e5).total_timesteps, int)


def test_integer_fields_still_reject_fractions_and_words():
    with pytest.raises(ValueError, match=r"^total_timesteps: expected an integer, got 100000.5$"):
        Config.from_yaml("n_timesteps: 100000.5\n")
    with pytest.raises(ValueError, match=r"^num_envs: expected an integer, got 'four'$"):
        Config(num_envs="four")
    with pytest.raises(ValueError, match=r"^num_envs: expected an integer, got inf$"):
        Config(num_envs="inf")


def test_eval_freq_above_the_iterations_evaluates_after_each_iteration(tmp_path):
    # `kppo train acrobot --set total_timesteps=40000`: 9 iterations of 16 x 256 steps, eval_freq 10
    acrobot = Config.from_yaml(Path(__file__).resolve().parents[2] / "configs" / "acrobot.yaml")
    short = acrobot.replace(total_timesteps=40_000)
    assert (short.num_iterations, short.eval_freq, short.eval_rounds) == (9, 10, 9)
    assert (acrobot.eval_freq, acrobot.eval_rounds) == (10, 10)
    short.to_yaml(tmp_path / "c.yaml")  # eval_freq is stored as given: the round trip stays lossless
    assert Config.from_yaml(tmp_path / "c.yaml") == short
    assert short.replace(total_timesteps=1_000_000).eval_rounds == 10


def test_replace_validates_and_translates():
    c = Config().replace(LR=1e-3, n_envs=8)
    assert (c.learning_rate, c.num_envs) == (1e-3, 8)
    with pytest.raises(ValueError, match="num_envs"):
        Config().replace(num_envs=0)


@pytest.mark.parametrize("name", KERNEL_INITS)
def test_all_kernel_inits_accepted(name):
    assert Config(kernel_init=name).kernel_init == name


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_all_activations_accepted(name):
    assert Config(activation=name).activation == name


def test_env_backend_says_native_as_the_runners_do_and_still_reads_tf():
    assert kppo.Config(env_backend="native").env_backend == "native"
    assert kppo.Config(env_backend="tf").env_backend == "native"  # the older spelling, in configs users wrote
    assert kppo.Config.from_yaml("env_backend: tf\n").env_backend == "native"
    with pytest.raises(ValueError, match=r"^env_backend: expected one of \('auto', 'native', 'gymnasium'\), got 'jax'"):
        kppo.Config(env_backend="jax")
