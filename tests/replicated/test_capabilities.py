"""The capability matrix's mirrored cells (tests/helpers/capabilities.py) on 2 logical CPU devices: native and
gymnasium envs x MLP, LSTM, CNN and masked agents under MirroredStrategy; the replicas stay identical."""

import numpy as np
import pytest

from tests.helpers.capabilities import cell_id, cells, check_cell, train_cell

CELLS = cells("mirrored")


@pytest.mark.parametrize("cell", CELLS, ids=[cell_id(c) for c in CELLS])
def test_every_env_kind_trains_every_agent_kind_on_two_replicas(cell):
    result = train_cell(cell)
    check_cell(cell, result)
    for variable in result.agent.variables:
        first, second = (v.numpy() for v in variable.value.values)
        np.testing.assert_array_equal(first, second)
