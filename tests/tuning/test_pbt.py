"""Population-based training inside one compiled population: a copied member continues bit-identically from its
donor's state with only the perturbed values changed; the lineage, the best config and its schedule; refusals."""

import csv

import numpy as np
import pytest
import yaml

from kppo.config.options import Config
from kppo.training.train import train
from kppo.tuning.pbt import copy_member, explore, pbt, set_member_values
from kppo.tuning.space import parse_space
from tests.tuning.settings import TINY as SETTINGS

# A member's statistics must be copied too (normalize_obs); two exploit steps in the run.
TINY = SETTINGS.replace(eval_freq=4, iterations_per_call=2, normalize_obs=True)
SPACE = parse_space({"learning_rate": {"type": "float", "low": 1e-5, "high": 1e-2, "log": True}}, TINY)


def _weights(result, member):
    return [v.numpy() for v in result.members[member].agent.variables]


def test_a_copied_member_continues_bit_identically_from_its_donors_state_with_only_its_new_values():
    new_rate = TINY.learning_rate * 1.2

    def after_first_round(runner, state, row):  # round 1: member 1 becomes member 0, at a new learning rate
        if int(row["train/total_steps"]) == 2 * TINY.rollout_size:
            state = copy_member(runner, state, loser=1, donor=0, salt=7)
            set_member_values(runner, 1, {"learning_rate": new_rate})
        return state

    # member 1 starts elsewhere (seed 5, another learning rate): the copy must overwrite all of it
    copied = train("CartPole-v1", [TINY, TINY.replace(seed=5, learning_rate=3e-3)], between_rounds=after_first_round)
    # reference: member 1 is member 0 from the start (same config and seed), so copying changes only its key
    reference = train("CartPole-v1", [TINY, TINY], between_rounds=after_first_round)
    for a, b in zip(_weights(copied, 1), _weights(reference, 1)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(_weights(copied, 0), _weights(reference, 0)):
        np.testing.assert_array_equal(a, b)  # the donor is untouched
    assert not all(np.array_equal(a, b) for a, b in zip(_weights(copied, 0), _weights(copied, 1)))  # own lr, key
    np.testing.assert_array_equal(
        copied.members[1].runner_state.rollout.obs_stats.mean, reference.members[1].runner_state.rollout.obs_stats.mean
    )


def test_explore_multiplies_by_0_8_or_1_2_within_the_space_or_redraws():
    rng = np.random.default_rng(0)
    moved = {explore(SPACE, {"learning_rate": 1e-3}, rng, 0.0)["learning_rate"] for _ in range(40)}
    assert sorted(moved) == pytest.approx([8e-4, 1.2e-3])
    assert explore(SPACE, {"learning_rate": 1e-2}, np.random.default_rng(1), 0.0)["learning_rate"] <= 1e-2  # clipped
    drawn = [explore(SPACE, {"learning_rate": 1e-3}, rng, 1.0)["learning_rate"] for _ in range(20)]
    assert all(1e-5 <= x <= 1e-2 for x in drawn) and len(set(drawn)) == 20
    choices = parse_space({"clip_range": {"type": "categorical", "choices": [0.1, 0.2, 0.3]}}, TINY)
    assert {explore(choices, {"clip_range": 0.2}, rng, 0.0)["clip_range"] for _ in range(30)} == {0.1, 0.3}


@pytest.mark.slow  # 25 s of training; the copy's bit-identity test and explore's stay in the default suite
def test_pbt_writes_its_lineage_the_best_config_and_the_schedule_that_made_it(tmp_path):
    result = pbt("CartPole-v1", TINY, SPACE, members=4, interval=1, out=tmp_path, seed=3)
    assert result.returns.shape == (4, 4)  # rounds x members
    assert len(result.lineage) == 3  # after rounds 1, 2 and 3 (not after the last), one loser each
    for row in result.lineage:
        assert row["return"] <= row["donor_return"] and row["member"] != row["donor"]
    rows = list(csv.DictReader((tmp_path / "pbt.csv").open()))
    assert [int(r["round"]) for r in rows] == [1, 2, 3]
    assert Config.from_yaml(tmp_path / "best.yaml") == result.best_config
    assert (
        result.best_config.learning_rate == result.best_params["learning_rate"] == result.schedule[-1]["learning_rate"]
    )
    schedule = yaml.safe_load((tmp_path / "best_schedule.yaml").read_text())
    assert schedule[0]["from_step"] == 0 and [s["from_step"] for s in schedule] == sorted(
        s["from_step"] for s in schedule
    )
    assert result.best_value == result.returns[-1].max()


@pytest.mark.parametrize(
    ("env", "space", "members", "message"),
    [
        ("CartPole-v1", {"num_epochs": {"type": "int", "low": 1, "high": 4}}, 4, "a member's values must be sweepable"),
        ("Acrobot-v1", None, 4, "--pbt: needs a TF-native env"),
        ("CartPole-v1", None, 1, r"expected --batch >= 2"),
        ("CartPole-v1", None, (4, float("nan")), r"--pbt-quantile: expected a fraction in \(0, 0.5\], got nan"),
    ],
)
def test_pbt_refuses_in_one_line(env, space, members, message):
    config = TINY.replace(env_backend="gymnasium") if env == "Acrobot-v1" else TINY
    space = SPACE if space is None else parse_space(space, TINY)
    members, quantile = members if isinstance(members, tuple) else (members, 0.25)
    with pytest.raises(ValueError, match=message):
        pbt(env, config, space, members=members, quantile=quantile)
