"""The capability matrix's single and population cells (tests/helpers/capabilities.py): native and gymnasium envs x
MLP, LSTM, CNN and masked agents, each a short run of `kppo.train` and the checks of what must be true of it."""

import pytest

from tests.helpers.capabilities import cell_id, cells, check_cell, train_cell

CELLS = cells("single") + cells("population")


@pytest.mark.parametrize("cell", CELLS, ids=[cell_id(c) for c in CELLS])
def test_every_env_kind_trains_every_agent_kind_alone_and_as_a_population(cell):
    check_cell(cell, train_cell(cell))
