"""Search spaces: the YAML format, RL-Zoo's derived parameters and space, and one-line refusals of bad input."""

import optuna
import pytest

from kppo.config.options import Config
from kppo.tuning.space import default_space, load_space, parse_space

BASE = Config(num_envs=4, num_steps=64)


def test_a_space_samples_and_applies_config_fields_in_any_spelling():
    space = parse_space(
        {
            "LR": {"type": "float", "low": 1e-4, "high": 1e-3, "log": True},  # rex's spelling
            "n_epochs": {"type": "categorical", "choices": [2, 4]},  # SB3's
            "gae_lambda": {"type": "float", "low": 0.9, "high": 0.99, "step": 0.01},
        },
        BASE,
    )
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1)).ask()
    params = space.suggest(trial)
    assert set(params) == {"LR", "n_epochs", "gae_lambda"}  # the study names them as the file does
    config = space.apply(BASE, params)
    assert (config.learning_rate, config.num_epochs, config.gae_lambda) == (
        params["LR"],
        params["n_epochs"],
        params["gae_lambda"],
    )
    assert 1e-4 <= config.learning_rate <= 1e-3 and config.num_envs == 4
    assert not space.batches  # num_epochs is a shape field: these trials train one by one


def test_rl_zoos_derived_parameters_and_its_ppo_space():
    space = default_space(BASE)
    assert list(space.params)[:4] == ["batch_size_pow", "n_steps_pow", "one_minus_gamma", "one_minus_gae_lambda"]
    config = space.apply(
        BASE,
        {"batch_size_pow": 6, "n_steps_pow": 5, "one_minus_gamma": 0.01, "net_arch": "medium", "activation_fn": "relu"},
    )
    assert config.num_steps == 32 and config.num_minibatches == 2  # 4 envs x 32 steps in minibatches of 64
    assert config.gamma == pytest.approx(0.99) and config.activation == "relu"
    assert config.actor_hidden_units == (256, 256) == config.critic_hidden_units
    sweepable = parse_space({"learning_rate": {"type": "float", "low": 1e-4, "high": 1e-3}}, BASE)
    assert sweepable.batches


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"learnin_rate": {"type": "float", "low": 0.1, "high": 1.0}}, "unknown option 'learnin_rate'.*did you mean"),
        ({"learning_rate": {"type": "uniform", "low": 0.1, "high": 1.0}}, r"learning_rate.type: expected one of float"),
        ({"learning_rate": {"type": "float", "low": 0.1}}, r"learning_rate.high: expected a number, got nothing"),
        ({"learning_rate": {"type": "float", "low": 1.0, "high": 0.1}}, "expected low <= high"),
        ({"learning_rate": {"type": "float", "low": 0.0, "high": 0.1, "log": True}}, r"expected > 0 on a log scale"),
        ({"learning_rate": {"type": "float", "low": 0.1, "high": 1, "choices": [1]}}, "takes high, log, low, step"),
        ({"num_epochs": {"type": "int", "low": 1.5, "high": 4}}, "an int distribution expects integer bounds"),
        ({"clip_range": {"type": "categorical", "choices": []}}, r"clip_range.choices: expected a non-empty list"),
        ({"actor_hidden_units": {"type": "categorical", "choices": [[64, 64]]}}, "expected numbers, strings"),
        ({"seed": {"type": "int", "low": 0, "high": 9}}, "seed cannot vary in a search"),
        ({"n_timesteps": {"type": "int", "low": 1000, "high": 9000}}, "total_timesteps cannot vary in a search"),
        ({"clip_range": {"type": "float", "low": 0.0, "high": 0.3}}, r"the value 0.0 makes no valid config"),
        ({"net_arch": {"type": "categorical", "choices": ["huge"]}}, r"expected choices among \['tiny'"),
        (
            {
                "gamma": {"type": "float", "low": 0.9, "high": 0.99},
                "one_minus_gamma": {"type": "float", "low": 0.01, "high": 0.1},
            },
            "sets 'gamma', which 'gamma' sets too",
        ),
        ([1, 2], "expected a mapping of field"),
    ],
)
def test_bad_spaces_are_refused_in_one_line(space, message):
    with pytest.raises(ValueError, match=message) as error:
        parse_space(space, BASE)
    assert "\n" not in str(error.value)


def test_a_space_file_names_its_file_and_line_and_constructs_no_python_object(tmp_path):
    bad = tmp_path / "space.yaml"
    bad.write_text("learning_rate: {type: float, low: 1e-4\n")
    with pytest.raises(ValueError, match=r"space YAML '.*space.yaml': could not parse at line 2"):
        load_space(bad, BASE)
    evil = tmp_path / "evil.yaml"
    marker = tmp_path / "ran"
    evil.write_text(f"learning_rate: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ValueError, match=r"space YAML '.*evil.yaml': could not parse .*python/object/apply"):
        load_space(evil, BASE)
    assert not marker.exists()
    good = tmp_path / "good.yaml"
    good.write_text("ent_coef: {type: float, low: 0.0, high: 0.02}\n")
    assert list(load_space(good, BASE).params) == ["ent_coef"]
