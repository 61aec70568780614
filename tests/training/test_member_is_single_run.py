"""A population member is its own single run at default settings (XLA on, every agent kind, TF-native and gymnasium
envs): member i of `kppo.train(env, config, seed=[0, 1])` ends the whole run with the weights of
`kppo.train(env, config, seed=i)`. The default suite compares member 1, whose keys a member index that leaked into
them (or a member 0 standing in for every member) would change; `-m slow` compares both.

Every random number comes from `kppo.core.counter_rng`, so the population's XLA program and the single run's mix of
XLA and TF kernels draw the same numbers; what remains is float32 rounding, where XLA fuses and vectorizes the same
arithmetic differently (1e-7 after a run here). The default suite runs one cell per env kind; `-m slow` runs all."""

from __future__ import annotations

import numpy as np
import pytest

import kppo
from tests.helpers.capabilities import AGENT_KINDS, ENV_KINDS, cell_config, cell_env

#: the members' weights after the whole run, against their single runs': float32 rounding, not other random numbers
#: (different draws give differences of 1e-3 and more after one iteration)
TOLERANCE = 1e-6
FAST = {("native", "masked"), ("gymnasium", "mlp")}
CELLS = [(env, agent) for env in ENV_KINDS for agent in AGENT_KINDS]


def _largest_difference(first, second) -> float:
    pairs = zip(first.agent.variables, second.agent.variables, strict=True)
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in pairs)


@pytest.mark.parametrize(
    "env, agent",
    [c if c in FAST else pytest.param(*c, marks=pytest.mark.slow) for c in CELLS],
    ids=["-".join(c) for c in CELLS],
)
def test_each_member_ends_the_run_with_its_single_runs_weights(env, agent):
    config = cell_config(env, "population", agent)
    population = kppo.train(cell_env(env, agent), config, seed=[0, 1])
    members = population.members[1:] if (env, agent) in FAST else population.members
    for member in members:
        single = kppo.train(cell_env(env, agent), config, seed=member.config.seed)
        difference = _largest_difference(member, single)
        assert difference <= TOLERANCE, f"seed {member.config.seed}: weights differ by {difference:.3g}"
        np.testing.assert_allclose(
            member.metrics["eval/mean_returns"], single.metrics["eval/mean_returns"], rtol=1e-5, atol=1e-5
        )
