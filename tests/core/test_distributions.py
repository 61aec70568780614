import gymnasium as gym
import numpy as np
import pytest

from kppo._tf import tf
from kppo.core.distributions import make_distribution
from tests.helpers.sampling import fits_cdf, fits_frequencies, normal_cdf

KEY = tf.constant([1, -2], tf.int32)
ASYMMETRIC = gym.spaces.Box(low=np.array([-3.0, 0.0], np.float32), high=np.array([0.5, 4.0], np.float32))


@pytest.mark.parametrize("squash", [False, True])
def test_box_actions_are_rescaled_from_unit_interval(squash):
    dist = make_distribution(ASYMMETRIC, squash)
    u = tf.constant([[-1.0, 1.0], [0.0, 0.0], [5.0, -5.0]])
    out = dist.to_env(u).numpy()
    f = np.tanh if squash else (lambda x: np.clip(x, -1, 1))
    want = ASYMMETRIC.low + (f(u.numpy()) + 1) / 2 * (ASYMMETRIC.high - ASYMMETRIC.low)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert np.all(out >= ASYMMETRIC.low) and np.all(out <= ASYMMETRIC.high)


@pytest.mark.parametrize("use_sde", [False, True])
def test_box_actions_without_rescale_are_the_sample_clipped_to_the_bounds_as_sb3s(use_sde):
    dist = make_distribution(ASYMMETRIC, use_sde=use_sde, latent_dim=4, rescale=False)
    u = np.array([[-1.0, 1.0], [0.25, 3.5], [5.0, -5.0]], np.float32)
    want = [[-1.0, 1.0], [0.25, 3.5], [0.5, 0.0]]
    np.testing.assert_array_equal(dist.to_env(tf.constant(u)).numpy(), want)
    np.testing.assert_array_equal(dist.to_env_np(u), want)


def test_gaussian_log_prob_entropy_and_mode():
    dist = make_distribution(ASYMMETRIC)
    mean, log_std = tf.constant([[0.5, -1.0]]), tf.constant([[0.0, np.log(2.0)]], tf.float32)
    u = tf.constant([[1.5, 1.0]])
    want = sum(
        -0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
        for x, m, s in [(1.5, 0.5, 1.0), (1.0, -1.0, 2.0)]
    )
    assert dist.log_prob((mean, log_std), u).numpy()[0] == pytest.approx(want, rel=1e-5)
    assert dist.entropy((mean, log_std)).numpy()[0] == pytest.approx(np.log(2.0) + np.log(2 * np.pi * np.e), rel=1e-5)
    np.testing.assert_array_equal(dist.mode((mean, log_std)).numpy(), mean.numpy())


def test_categorical_with_start():
    dist = make_distribution(gym.spaces.Discrete(3, start=-1))
    logits = tf.constant([[0.0, 2.0, 1.0]])
    assert dist.mode(logits).numpy()[0] == 1
    assert dist.to_env(dist.mode(logits)).numpy()[0] == 0
    probs = np.exp([0.0, 2.0, 1.0]) / np.exp([0.0, 2.0, 1.0]).sum()
    assert dist.log_prob(logits, tf.constant([2])).numpy()[0] == pytest.approx(np.log(probs[2]), rel=1e-5)


def test_sampling_is_stateless():
    dist = make_distribution(gym.spaces.Discrete(4))
    logits = tf.zeros([100, 4])
    a = dist.sample(logits, tf.constant([1, 2])).numpy()
    np.testing.assert_array_equal(a, dist.sample(logits, tf.constant([1, 2])).numpy())
    assert not np.array_equal(a, dist.sample(logits, tf.constant([1, 3])).numpy())


@pytest.mark.parametrize(
    "space, match",
    [
        (gym.spaces.Tuple((gym.spaces.Discrete(2),)), "Tuple"),
        (gym.spaces.Text(5), "Text"),
        (gym.spaces.Box(-np.inf, np.inf, (2,)), "bounded Box"),
        (gym.spaces.MultiDiscrete([[2, 3], [2, 2]]), "1-D MultiDiscrete"),
        (gym.spaces.MultiBinary([2, 2]), "1-D MultiBinary"),
    ],
)
def test_unsupported_spaces_are_named(space, match):
    with pytest.raises(ValueError, match=match):
        make_distribution(space)


def test_multi_discrete_sums_independent_categoricals():
    space = gym.spaces.MultiDiscrete([2, 3], start=[0, -1])
    dist = make_distribution(space)
    assert dist.param_size == 5
    logits = tf.constant([[0.0, 1.0, 2.0, 0.0, 0.0]])
    np.testing.assert_array_equal(dist.mode(logits).numpy(), [[1, 0]])
    np.testing.assert_array_equal(dist.to_env(dist.mode(logits)).numpy(), [[1, -1]])
    p1, p2 = np.exp([0.0, 1.0]) / np.exp([0.0, 1.0]).sum(), np.exp([2.0, 0, 0]) / np.exp([2.0, 0, 0]).sum()
    assert dist.log_prob(logits, tf.constant([[0, 2]])).numpy()[0] == pytest.approx(np.log(p1[0] * p2[2]), rel=1e-5)
    want_entropy = -(p1 * np.log(p1)).sum() - (p2 * np.log(p2)).sum()
    assert dist.entropy(logits).numpy()[0] == pytest.approx(want_entropy, rel=1e-5)
    sample = dist.sample(tf.zeros([500, 5]), tf.constant([1, 2])).numpy()
    assert sample.shape == (500, 2) and set(sample[:, 1]) == {0, 1, 2}
    assert all(space.contains(a) for a in dist.to_env(sample).numpy())


def test_multi_binary_bernoulli():
    dist = make_distribution(gym.spaces.MultiBinary(3))
    logits = tf.constant([[2.0, -1.0, 0.5]])
    np.testing.assert_array_equal(dist.mode(logits).numpy(), [[1, 0, 1]])
    p = 1 / (1 + np.exp(-np.array([2.0, -1.0, 0.5])))
    want = np.log(p[0]) + np.log(1 - p[1]) + np.log(p[2])
    assert dist.log_prob(logits, tf.constant([[1, 0, 1]])).numpy()[0] == pytest.approx(want, rel=1e-5)
    assert dist.sample(tf.zeros([4, 3]), tf.constant([0, 1])).numpy().dtype == np.int32


def test_gsde_density_and_noise():
    from kppo.core.distributions import StateDependentNoise

    dist = make_distribution(ASYMMETRIC, use_sde=True, latent_dim=3, full_std=True)
    assert isinstance(dist, StateDependentNoise) and dist.state_dependent
    mean = tf.constant([[0.1, -0.2]])
    latent = tf.constant([[1.0, 2.0, 0.0]])
    log_std = tf.constant(np.log([[1.0, 2.0], [0.5, 1.0], [3.0, 3.0]]), tf.float32)
    params = (mean, latent, log_std)
    # variance_a = sum_l latent_l^2 std_la^2: a0 = 1*1 + 4*0.25 = 2, a1 = 1*4 + 4*1 = 8
    std = np.sqrt(np.array([2.0, 8.0]) + 1e-6)
    u = np.array([0.5, 1.0])
    want = sum(-0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi) for x, m, s in zip(u, [0.1, -0.2], std))
    assert dist.log_prob(params, tf.constant([u], tf.float32)).numpy()[0] == pytest.approx(want, rel=1e-5)
    noise = dist.new_noise(params, tf.constant([1, 2]), 1)
    assert noise.shape == (1, 3, 2)
    np.testing.assert_allclose(
        dist.sample(params, tf.constant([0, 0]), noise).numpy(),
        mean.numpy() + latent.numpy() @ noise.numpy()[0],
        rtol=1e-5,
    )
    big = dist.new_noise(params, tf.constant([3, 4]), 4000).numpy()
    np.testing.assert_allclose(big.std(axis=0), np.exp(log_std.numpy()), rtol=0.06)


def test_gsde_expln_std_is_sb3s_formula_in_tensorflow_and_numpy():
    """SB3's use_expln: exp(log_std) at or below 0, log1p(log_std + 1e-6) + 1 above (hand values); the density
    and the host's noise use it."""
    dist = make_distribution(ASYMMETRIC, use_sde=True, latent_dim=5, full_std=False, use_expln=True)
    log_std = np.array([[-2.0], [-0.5], [0.0], [0.5], [3.0]], np.float32)
    want = np.array([np.exp(-2.0), np.exp(-0.5), 1.0, np.log1p(0.5 + 1e-6) + 1.0, np.log1p(3.0 + 1e-6) + 1.0])
    np.testing.assert_allclose(dist._std(tf.constant(log_std)).numpy()[:, 0], want, rtol=1e-6)
    np.testing.assert_allclose(dist._std_np(log_std)[:, 1], want, rtol=1e-6)
    plain = make_distribution(ASYMMETRIC, use_sde=True, latent_dim=5, full_std=False)
    np.testing.assert_allclose(plain._std_np(log_std)[:, 0], np.exp(log_std[:, 0]), rtol=1e-6)
    params = (tf.zeros([1, 2]), tf.ones([1, 5]), tf.constant(log_std))
    variance = np.sum(want**2) + 1e-6  # every latent feature 1: the variance sums the squared stds
    u = np.array([[0.3, -0.4]], np.float32)
    logp = np.sum(-0.5 * u**2 / variance - 0.5 * np.log(variance) - 0.5 * np.log(2 * np.pi))
    assert dist.log_prob(params, tf.constant(u)).numpy()[0] == pytest.approx(logp, rel=1e-5)
    noise = dist.new_noise_np((None, None, log_std), np.random.default_rng(0), 4000)
    np.testing.assert_allclose(noise.std(axis=0)[:, 0], want, rtol=0.06)


def test_gsde_needs_a_box():
    with pytest.raises(ValueError, match="use_sde: gSDE needs a Box action space, got Discrete"):
        make_distribution(gym.spaces.Discrete(2), use_sde=True, latent_dim=4)


@pytest.mark.parametrize("freq, steps", [(-1, [0]), (4, [0, 4, 8]), (1, list(range(10)))])
def test_gsde_noise_schedule(freq, steps):
    from kppo.rollout.native import resample_noise

    assert [t for t in range(10) if resample_noise(t, freq)] == steps


# --- the numpy twins the host rollout acts with --------------------------------------------------------------------
HOST_DRAWS = 100_000


def _frequencies(draws: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(draws.ravel(), minlength=n) / draws.size


def test_host_categorical_draws_follow_the_softmax_and_match_mode_and_to_env():
    dist = make_distribution(gym.spaces.Discrete(3, start=-1))
    logits = np.array([0.0, 2.0, -1.0], np.float32)
    draws = dist.sample_np(np.tile(logits, (HOST_DRAWS, 1)), np.random.default_rng(0))
    assert draws.dtype == np.int32
    # 4.5 standard errors of a frequency near 0.5 with 1e5 draws: ~0.007
    np.testing.assert_allclose(_frequencies(draws, 3), np.exp(logits) / np.exp(logits).sum(), atol=0.007)
    batch = np.random.default_rng(1).normal(size=(20, 3)).astype(np.float32)
    np.testing.assert_array_equal(dist.mode_np(batch), dist.mode(tf.constant(batch)).numpy())
    np.testing.assert_array_equal(dist.to_env_np(dist.mode_np(batch)), dist.to_env(dist.mode(batch)).numpy())


def test_host_multi_categorical_and_bernoulli_draw_each_dimension_independently():
    dist = make_distribution(gym.spaces.MultiDiscrete([2, 3], start=[0, -1]))
    logits = np.array([0.0, 1.0, 2.0, 0.0, 0.0], np.float32)
    draws = dist.sample_np(np.tile(logits, (HOST_DRAWS, 1)), np.random.default_rng(0))
    p1, p2 = np.exp([0.0, 1.0]) / np.exp([0.0, 1.0]).sum(), np.exp([2.0, 0, 0]) / np.exp([2.0, 0, 0]).sum()
    np.testing.assert_allclose(_frequencies(draws[:, 0], 2), p1, atol=0.007)
    np.testing.assert_allclose(_frequencies(draws[:, 1], 3), p2, atol=0.007)
    batch = np.random.default_rng(1).normal(size=(20, 5)).astype(np.float32)
    np.testing.assert_array_equal(dist.to_env_np(dist.mode_np(batch)), dist.to_env(dist.mode(batch)).numpy())
    bernoulli = make_distribution(gym.spaces.MultiBinary(3))
    logits = np.array([2.0, -1.0, 0.5], np.float32)
    bits = bernoulli.sample_np(np.tile(logits, (HOST_DRAWS, 1)), np.random.default_rng(0))
    np.testing.assert_allclose(bits.mean(axis=0), 1 / (1 + np.exp(-logits)), atol=0.007)
    np.testing.assert_array_equal(bernoulli.mode_np(batch[:, :3]), bernoulli.mode(batch[:, :3]).numpy())


@pytest.mark.parametrize("squash", [False, True])
def test_host_gaussian_draws_have_the_mean_and_std_and_map_to_env_units_as_tf(squash):
    dist = make_distribution(ASYMMETRIC, squash)
    mean, log_std = np.array([0.5, -1.0], np.float32), np.array([0.0, np.log(2.0)], np.float32)
    draws = dist.sample_np(
        (np.tile(mean, (HOST_DRAWS, 1)), np.tile(log_std, (HOST_DRAWS, 1))), np.random.default_rng(0)
    )
    assert draws.dtype == np.float32
    np.testing.assert_allclose(draws.mean(axis=0), mean, atol=0.03)
    np.testing.assert_allclose(draws.std(axis=0), np.exp(log_std), rtol=0.01)
    np.testing.assert_allclose(
        dist.to_env_np(draws[:50]), dist.to_env(tf.constant(draws[:50])).numpy(), rtol=1e-6, atol=1e-6
    )


def test_host_gsde_noise_has_the_std_and_sampling_adds_latent_times_noise():
    dist = make_distribution(ASYMMETRIC, use_sde=True, latent_dim=3, full_std=True)
    mean, latent = np.array([[0.1, -0.2]], np.float32), np.array([[1.0, 2.0, 0.0]], np.float32)
    log_std = np.log([[1.0, 2.0], [0.5, 1.0], [3.0, 3.0]]).astype(np.float32)
    big = dist.new_noise_np((mean, latent, log_std), np.random.default_rng(0), 20_000)
    assert big.shape == (20_000, 3, 2) and big.dtype == np.float32
    np.testing.assert_allclose(big.std(axis=0), np.exp(log_std), rtol=0.03)
    np.testing.assert_allclose(
        dist.sample_np((mean, latent, log_std), None, big[:1]), mean + latent @ big[0], rtol=1e-6
    )
    # without noise: a draw from the gSDE density N(mean, latent^2 @ std^2)
    draws = dist.sample_np(
        (np.tile(mean, (HOST_DRAWS, 1)), np.tile(latent, (HOST_DRAWS, 1)), log_std), np.random.default_rng(1)
    )
    np.testing.assert_allclose(draws.std(axis=0), np.sqrt([2.0, 8.0]), rtol=0.01)


# ---- action masks ----

MASKED_CASES = [
    (gym.spaces.Discrete(5), np.array([[True, False, True, False, False], [False, False, False, True, False]])),
    (gym.spaces.MultiDiscrete([3, 2]), np.array([[False, True, True, True, False], [True, False, False, False, True]])),
]


@pytest.mark.parametrize("space,mask", MASKED_CASES, ids=["discrete", "multidiscrete"])
def test_a_masked_action_is_never_drawn_in_100000_draws_in_tf_or_numpy(space, mask):
    dist = make_distribution(space)
    assert dist.mask_size == mask.shape[1]
    draws = 50_000  # per row, two rows, in TensorFlow and in numpy: 100,000 draws each
    logits = np.linspace(3.0, -1.0, dist.mask_size, dtype=np.float32)  # the masked ones are among the likely ones
    batch = np.tile(logits, (2 * draws, 1))
    masks = np.repeat(mask, draws, axis=0)  # rows 0..draws-1: mask[0], then mask[1]
    tf_draws = dist.sample(dist.masked(tf.constant(batch), tf.constant(masks)), tf.constant([1, 2])).numpy()
    host_draws = dist.sample_np(dist.masked_np(batch, masks), np.random.default_rng(0))
    sizes = np.atleast_1d(space.nvec if isinstance(space, gym.spaces.MultiDiscrete) else space.n)
    offsets = np.cumsum([0, *sizes[:-1]])
    for drawn in (tf_draws, host_draws):
        chosen = drawn.reshape(2 * draws, -1) + offsets  # columns of the concatenated mask
        assert np.take_along_axis(masks, chosen, axis=1).all(), "a masked action was drawn"
        for row in range(2):
            assert len(np.unique(chosen[row * draws : (row + 1) * draws])) == mask[row].sum()  # every allowed one is


def test_masked_log_prob_and_entropy_are_those_of_the_renormalized_allowed_actions():
    dist = make_distribution(gym.spaces.Discrete(4))
    logits = tf.constant([[1.0, 2.0, 0.5, -1.0]])
    mask = tf.constant([[True, False, True, True]])
    allowed = np.exp([1.0, 0.5, -1.0]) / np.exp([1.0, 0.5, -1.0]).sum()
    params = dist.masked(logits, mask)
    got = [dist.log_prob(params, tf.constant([a])).numpy()[0] for a in (0, 2, 3)]
    np.testing.assert_allclose(got, np.log(allowed), rtol=1e-6)
    assert dist.log_prob(params, tf.constant([1])).numpy()[0] < -1e7  # a masked action: probability exactly 0
    assert dist.entropy(params).numpy()[0] == pytest.approx(-(allowed * np.log(allowed)).sum(), rel=1e-6)
    assert dist.mode(params).numpy()[0] == 0  # the best allowed action, not the best action (1)
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = dist.entropy(dist.masked(logits, mask)) + dist.log_prob(dist.masked(logits, mask), tf.constant([0]))
    grad = tape.gradient(loss, logits).numpy()
    assert np.isfinite(grad).all() and grad[0, 1] == 0.0  # masked logits get no gradient and no NaN


def test_a_width_zero_mask_changes_nothing():
    dist = make_distribution(gym.spaces.Discrete(3))
    logits = tf.constant([[0.1, 0.2, 0.3]])
    assert dist.masked(logits, dist.no_mask([1])) is logits
    assert dist.masked(logits, None) is logits
    assert make_distribution(ASYMMETRIC).mask_size == 0


# ---- sampling: the distribution it claims, the same draws under XLA ----

N_DRAWS = 60_000
LOGITS = np.array([1.0, -0.5, 0.3, 2.0], np.float32)


def _frequencies_match(draws: np.ndarray, probs: np.ndarray) -> None:
    assert fits_frequencies(draws, probs), (np.bincount(draws), probs)


def _softmax(logits):
    e = np.exp(logits - logits.max())
    return e / e.sum()


def test_categorical_draws_follow_the_softmax_of_the_logits():
    dist = make_distribution(gym.spaces.Discrete(4))
    _frequencies_match(dist.sample(tf.constant(np.tile(LOGITS, (N_DRAWS, 1))), KEY).numpy(), _softmax(LOGITS))


def test_multi_discrete_draws_follow_each_dimensions_softmax():
    dist = make_distribution(gym.spaces.MultiDiscrete([4, 2]))
    second = np.array([0.4, -0.4], np.float32)
    draws = dist.sample(tf.constant(np.tile(np.concatenate([LOGITS, second]), (N_DRAWS, 1))), KEY).numpy()
    _frequencies_match(draws[:, 0], _softmax(LOGITS))
    _frequencies_match(draws[:, 1], _softmax(second))


def test_bernoulli_draws_follow_the_sigmoid_of_the_logits():
    dist = make_distribution(gym.spaces.MultiBinary(2))
    logits = np.array([0.7, -1.5], np.float32)
    draws = dist.sample(tf.constant(np.tile(logits, (N_DRAWS, 1))), KEY).numpy()
    for bit, p in enumerate(1 / (1 + np.exp(-logits))):
        _frequencies_match(draws[:, bit], np.array([1 - p, p]))


def test_gaussian_draws_have_the_mean_and_std_of_the_policy():
    dist = make_distribution(ASYMMETRIC)
    mean, log_std = tf.fill([N_DRAWS, 2], 0.3), tf.constant([np.log(0.5), np.log(2.0)], tf.float32)
    draws = dist.sample((mean, log_std), KEY).numpy()
    for column, std in enumerate([0.5, 2.0]):
        assert fits_cdf(draws[:, column], normal_cdf(0.3, std))


def test_gsde_draws_without_noise_have_the_policy_densitys_std():
    dist = make_distribution(ASYMMETRIC, use_sde=True, latent_dim=3)
    latent = tf.constant(np.tile([[1.0, 0.5, -2.0]], (N_DRAWS, 1)), tf.float32)
    log_std = tf.fill([3, 2], np.float32(np.log(0.3)))
    params = (tf.zeros([N_DRAWS, 2]), latent, log_std)
    want_std = np.sqrt((1.0 + 0.25 + 4.0) * 0.09 + 1e-6)
    draws = dist.sample(params, KEY).numpy()
    assert fits_cdf(draws[:, 0], normal_cdf(0.0, want_std))
    noise = dist.new_noise(params, KEY, 4).numpy()
    assert noise.shape == (4, 3, 2) and 0.2 < noise.std() < 0.4


@pytest.mark.parametrize(
    "space, params",
    [
        (gym.spaces.Discrete(4), lambda: tf.constant(np.tile(LOGITS, (64, 1)))),
        (gym.spaces.MultiDiscrete([4, 2]), lambda: tf.zeros([64, 6])),
        (gym.spaces.MultiBinary(3), lambda: tf.zeros([64, 3])),
        (ASYMMETRIC, lambda: (tf.zeros([64, 2]), tf.zeros([2]))),
    ],
    ids=["discrete", "multidiscrete", "multibinary", "box"],
)
def test_a_sample_under_xla_is_the_sample_in_tf_kernels(space, params):
    """The draws come from `kppo.core.counter_rng`: a population compiled by XLA draws what its single runs draw."""
    dist = make_distribution(space)
    eager = dist.sample(params(), KEY).numpy()
    xla = tf.function(lambda: dist.sample(params(), KEY), jit_compile=True)().numpy()
    if eager.dtype == np.int32:
        np.testing.assert_array_equal(xla, eager)
    else:  # Box-Muller's log and cos may differ in the last bit under XLA
        np.testing.assert_allclose(xla, eager, rtol=1e-6, atol=2e-6)
