"""The capability matrix's single and population cells (tests/helpers/capabilities.py): native and gymnasium envs x
MLP, LSTM, CNN and masked agents, each a short run of `kppo.train` and the checks of what must be true of it."""

import pytest

from tests.helpers.capabilities import cell_id, cells, check_cell, train_cell

CELLS = cells("single") + cells("population")
#: The recurrent populations take ~40-60 s each: `slow` (tests/training/test_same_seed.py's slow test trains them too).
#: The native MLP population (13 s): `slow` for the suite's budget; tests/training/runners/test_population.py trains
#: CartPole populations through `kppo.train` and checks each member against its single run.
#: The gymnasium MLP, CNN and masked populations: `slow` for the suite's budget; tests/training/runners/
#: test_host_population.py trains each of them in the default suite and checks every member against its single run.
#: The native masked population: `slow` for the suite's budget; covered in the default suite by tests/training/
#: test_member_is_single_run.py::test_each_member_ends_the_run_with_its_single_runs_weights[native-masked] (the same
#: cell trained, member 1 ending with its single run's weights and returns; the native-single masked cell here checks
#: that policy's masks).
SLOW = {
    ("native", "population", "masked"),
    ("native", "population", "lstm"),
    ("gymnasium", "population", "lstm"),
    ("native", "population", "mlp"),
    ("gymnasium", "population", "mlp"),
    ("gymnasium", "population", "cnn"),
    ("gymnasium", "population", "masked"),
}
PARAMS = [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CELLS]


@pytest.mark.parametrize("cell", PARAMS, ids=[cell_id(c) for c in CELLS])
def test_every_env_kind_trains_every_agent_kind_alone_and_as_a_population(cell):
    check_cell(cell, train_cell(cell))
