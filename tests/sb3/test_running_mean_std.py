"""SB3's `RunningMeanStd` (`kppo.sb3.running_mean_std`) against numpy's moments of the whole stream, as SB3's
test_vec_normalize.py checks it, and a `VecNormalize`'s `obs_rms` / `ret_rms` written back when updated or assigned."""

import numpy as np
import pytest

from kppo import VecNormalize, make_vec_env
from kppo.sb3.running_mean_std import RunningMeanStd


@pytest.mark.parametrize("shape", [(), (2,), (3, 4)])
def test_updates_and_combines_give_the_moments_of_the_whole_stream(shape):
    rng = np.random.default_rng(4)
    parts = [rng.normal(size=(n, *shape)) + offset for n, offset in ((3, 0.0), (4, 1.0), (5, -2.0))]
    whole = np.concatenate(parts)
    rms = RunningMeanStd(epsilon=0.0, shape=shape)
    for part in parts:
        rms.update(part)
    np.testing.assert_allclose(rms.mean, whole.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(rms.var, whole.var(axis=0), rtol=1e-12)
    assert rms.count == 12.0
    first, second = RunningMeanStd(shape=shape), RunningMeanStd(shape=shape)
    first.update(parts[0])
    second.update(np.concatenate(parts[1:]))
    copy = first.copy()
    first.combine(second)
    np.testing.assert_allclose(first.mean, whole.mean(axis=0), rtol=1e-3)  # both started from count 1e-4
    assert copy.count == pytest.approx(3 + 1e-4) and first.count == pytest.approx(12 + 2e-4)
    fresh = RunningMeanStd(shape=shape)
    assert fresh.mean.dtype == np.float64 and (fresh.var == 1).all() and fresh.count == 1e-4


def test_a_vecnormalizes_statistics_take_an_update_of_their_copy_and_an_assignment():
    """SB3 programs update `env.obs_rms` in place and assign it (`eval_env.obs_rms = env.obs_rms`): kppo's
    `obs_rms` is a copy of the statistics the wrapper (or its model) holds, which writes both back."""
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    batch = np.random.default_rng(0).normal(size=(8, 3))
    env.obs_rms.update(batch)
    expected = RunningMeanStd(shape=(3,))
    expected.update(batch)
    np.testing.assert_array_equal(env.obs_rms.mean, expected.mean)
    assert env.obs_rms.count == expected.count and env.ret_rms.count == 1e-4
    other = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=1))
    other.obs_rms = env.obs_rms
    np.testing.assert_array_equal(other.obs_rms.var, expected.var)
    env.ret_rms.update(np.array([2.0, 4.0]))
    assert env.ret_rms.count == pytest.approx(2 + 1e-4) and env.obs_rms.count == expected.count
