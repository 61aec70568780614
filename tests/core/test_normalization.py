import numpy as np
import pytest

from kppo.core import normalization
from kppo._tf import tf


def _stream(seed=0, n=5, batch=7, dim=3):
    rng = np.random.default_rng(seed)
    return [rng.normal(loc=3.0, scale=2.0, size=(batch, dim)).astype(np.float32) for _ in range(n)]


def test_incremental_updates_equal_batch_moments(variant):
    batches = _stream()
    update = variant(normalization.update_moments)
    stats = normalization.initial_stats([3])
    for b in batches:
        stats = update(stats, tf.constant(b))
    everything = np.concatenate(batches)
    # the 1e-4 pseudo-count at mean 0, var 1 (SB3's start) shifts the moments by ~1e-5 relative
    np.testing.assert_allclose(stats.mean.numpy(), everything.mean(0), rtol=1e-4)
    np.testing.assert_allclose(stats.var.numpy(), everything.var(0), rtol=1e-4)
    assert stats.count.numpy() == pytest.approx(len(everything) + 1e-4)


def test_merge_equals_one_stream():
    batches = _stream(seed=1, n=6)
    one = normalization.initial_stats([3])
    for b in batches:
        one = normalization.update_moments(one, tf.constant(b))
    left, right = normalization.initial_stats([3]), normalization.batch_stats(tf.constant(batches[3]))
    for b in batches[:3]:
        left = normalization.update_moments(left, tf.constant(b))
    for b in batches[4:]:
        right = normalization.update_moments(right, tf.constant(b))
    merged = normalization.merge(left, right)
    for got, want in zip(merged, one):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)


def test_normalize_centres_scales_and_clips():
    stats = normalization.Moments(tf.constant([1.0, -2.0]), tf.constant([4.0, 0.01]), tf.constant(10.0))
    out = normalization.normalize(stats, tf.constant([[3.0, -2.0], [1.0, 5.0]])).numpy()
    # (3 - 1) / sqrt(4 + 1e-8) = 1; (5 + 2) / 0.1 = 70 -> clipped to 10
    np.testing.assert_allclose(out, [[1.0, 0.0], [0.0, 10.0]], atol=1e-5)


def test_normalize_takes_vecnormalizes_clip_and_epsilon():
    stats = normalization.Moments(tf.constant([1.0, -2.0]), tf.constant([3.0, 0.0]), tf.constant(10.0))
    x = np.array([[3.0, -2.0], [1.0, 5.0], [-1.0, -2.5]], np.float32)
    # epsilon 1: (3 - 1) / sqrt(3 + 1) = 1 -> clipped to 0.5; (5 + 2) / sqrt(0 + 1) = 7 -> 0.5;
    # (-1 - 1) / 2 = -1 -> -0.5; (-2.5 + 2) / 1 = -0.5 stays
    want = [[0.5, 0.0], [0.0, 0.5], [-0.5, -0.5]]
    np.testing.assert_allclose(normalization.normalize(stats, x, 0.5, epsilon=1.0).numpy(), want, atol=1e-6)
    host = normalization.to_numpy(stats)
    np.testing.assert_allclose(normalization.normalize_np(host, x, 0.5, epsilon=1.0), want, atol=1e-6)
    np.testing.assert_allclose(normalization.normalize(stats, x, 0.9, epsilon=3.0).numpy()[0, 0], 2 / np.sqrt(6), 1e-6)


@pytest.mark.parametrize(
    "constants",
    [
        normalization.DEFAULTS,
        normalization.Constants(clip_reward=0.4, epsilon=0.05),
        normalization.Constants(gamma=0.5),  # VecNormalize's own gamma, not the run's (0.99 below)
    ],
    ids=["sb3", "set", "own gamma"],
)
def test_reward_scaling_matches_sb3_loop(constants):
    rng = np.random.default_rng(2)
    rewards = rng.normal(size=(50, 4)).astype(np.float32)
    dones = rng.random((50, 4)) < 0.1
    run_gamma = 0.9 if constants.gamma is None else 0.99
    gamma = run_gamma if constants.gamma is None else constants.gamma  # the running return's discount
    # SB3 VecNormalize in numpy: returns = returns * gamma + r; update with returns; r / sqrt(var + eps); reset on done
    mean, var, count = 0.0, 1.0, 1e-4
    running = np.zeros(4)
    want = []
    for r, d in zip(rewards, dones):
        running = running * gamma + r
        b_mean, b_var, b_count = running.mean(), running.var(), len(running)
        delta, total = b_mean - mean, count + b_count
        mean, var = (
            mean + delta * b_count / total,
            (var * count + b_var * b_count + delta**2 * count * b_count / total) / total,
        )
        count = total
        want.append(np.clip(r / np.sqrt(var + constants.epsilon), -constants.clip_reward, constants.clip_reward))
        running[d] = 0.0
    stats, disc = normalization.initial_stats(()), tf.zeros([4])
    got = []
    for r, d in zip(rewards, dones):
        scaled, disc, stats = normalization.scale_reward(
            stats, disc, tf.constant(r), tf.constant(d), run_gamma, constants
        )
        got.append(scaled.numpy())
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-4, atol=1e-5)
    assert (np.abs(np.array(want)) == constants.clip_reward).any() == (constants.clip_reward < 1)  # the clip binds


def test_merge_replicas_counts_the_shared_start_once():
    """Replicas start from the same merged moments and each adds its own shard; merging them gives the moments of
    one stream that saw every shard (tf.distribute's per-iteration merge)."""
    batches = _stream(seed=3, n=4, batch=16)
    base = normalization.initial_stats([3])
    for b in batches[:2]:
        base = normalization.update_moments(base, tf.constant(b))
    replicas = [normalization.update_moments(base, tf.constant(b)) for b in batches[2:]]
    one = normalization.update_moments(base, tf.constant(np.concatenate(batches[2:])))
    merged = normalization.merge_replicas(base, replicas)
    for got, want in zip(merged, one):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    # one replica: unchanged
    for got, want in zip(normalization.merge_replicas(base, replicas[:1]), replicas[0]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_merge_replicas_stays_accurate_when_the_start_dominates():
    """A long run: the shared start holds 1e6 samples, each replica adds 256; the merge stays within 1e-6 relative
    of one device's float32 stream over the same samples (no cancellation from subtracting the start)."""
    rng = np.random.default_rng(4)
    start = rng.normal(loc=5.0, scale=3.0, size=(1_000_000, 2))
    shards = [rng.normal(loc=5.0, scale=3.0, size=(256, 2)) for _ in range(4)]
    base = normalization.batch_stats(tf.constant(start))
    replicas = [normalization.update_moments(base, tf.constant(s)) for s in shards]
    merged = normalization.merge_replicas(base, replicas)
    one = normalization.update_moments(base, tf.constant(np.concatenate(shards)))
    for got, want in zip(merged, one):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_the_host_twins_compute_what_the_tensorflow_functions_compute():
    rng = np.random.default_rng(0)
    tf_stats, host_stats = normalization.initial_stats([3]), normalization.to_numpy(normalization.initial_stats([3]))
    for _ in range(5):
        batch = rng.normal(5.0, 3.0, (7, 3)).astype(np.float32)
        tf_stats = normalization.update_moments(tf_stats, tf.constant(batch))
        host_stats = normalization.update_moments_np(host_stats, batch)
    for got, want in zip(host_stats, tf_stats):
        np.testing.assert_allclose(got, want.numpy(), rtol=2e-6)
    assert all(np.asarray(x).dtype == np.float32 for x in host_stats)
    x = rng.normal(5.0, 30.0, (9, 3)).astype(np.float32)
    np.testing.assert_allclose(
        normalization.normalize_np(host_stats, x), normalization.normalize(tf_stats, x).numpy(), rtol=1e-5, atol=1e-6
    )
