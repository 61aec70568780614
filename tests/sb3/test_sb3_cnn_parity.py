"""kppo's NatureCNN and `kppo.PPO("CnnPolicy")` against Stable-Baselines3's (`tests/fixtures/sb3/cnn.npz`, made by
`record_sb3_cnn.py` with SB3 2.9.2 / torch 2.13 on 36x44x3 uint8 images): from SB3's weights (transplanted by
`tests.helpers.sb3_cnn`), kppo's features, logits and values equal SB3's to float32 rounding, for HWC images and
the same images as CHW, with one shared features extractor and with one each; and one update from SB3's rollout and
minibatch order gives SB3's losses, gradient norms and final weights."""

import gymnasium as gym
import numpy as np
import pytest

import kppo
from kppo._tf import tf
from kppo.agent import extractors
from kppo.core.optimizers import make_optimizer
from kppo.core.types import Batch
from kppo.training.runners.settings import update_settings
from kppo.update.ppo import minibatch_step
from tests.helpers.sb3_cnn import (
    SHAPE_CHW,
    SHAPE_HWC,
    BlockImageEnv,
    agent_pairs,
    assign,
    cnn_data,
    tower_pairs,
)

DATA = cnn_data()
#: SB3's features extractors in the fixture: (policy, torch prefix, recorded features).
TOWERS = [
    ("shared", "shared.features_extractor", "shared:features"),
    ("separate_pi", "separate.pi_features_extractor", "separate:features_pi"),
    ("separate_vf", "separate.vf_features_extractor", "separate:features_vf"),
]


def _close(got, want, tol=1e-5):
    """float32 rounding: |got - want| <= tol * max |want| (SB3's logits are small: action_net's gain is 0.01)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * np.abs(want).max())


def _nature_cnn(shape):
    tower = extractors.NatureCNN(shape)
    tower(tf.zeros([1, *shape]))
    return tower


def test_the_helpers_env_is_the_recorded_one():
    env = BlockImageEnv()
    obs, _ = env.reset(seed=100)
    seen = [obs]
    for t in range(len(DATA["obs_hwc"]) - 1):
        obs, _, terminated, truncated, _ = env.step(t % 3)
        seen.append(obs)
        if terminated or truncated:
            env.reset()
    np.testing.assert_array_equal(np.stack(seen), DATA["obs_hwc"])
    np.testing.assert_array_equal(DATA["obs_chw"], DATA["obs_hwc"].transpose(0, 3, 1, 2))


def test_kppo_make_vec_env_gives_the_recorded_rollouts_images():
    """SB3's rollout (env-major rows) from `kppo.make_vec_env(BlockImageEnv, n_envs=2, seed=0)` driven by SB3's
    actions: the same uint8 HWC images, episode ends and truncation flags."""
    n_envs, n_steps = int(DATA["n_envs"]), int(DATA["n_steps"])
    want = DATA["update:obs"].reshape(n_envs, n_steps, *SHAPE_HWC)
    actions = DATA["update:actions"].reshape(n_envs, n_steps)
    venv = kppo.make_vec_env(BlockImageEnv, n_envs=n_envs, seed=0)
    obs, dones, truncated = venv.reset(), [], []
    for t in range(n_steps):
        assert obs.dtype == np.uint8
        np.testing.assert_array_equal(obs, want[:, t], err_msg=f"step {t}")
        obs, _, done, infos = venv.step(actions[:, t])
        dones.append(done)
        truncated.append([bool(info.get("TimeLimit.truncated", False)) for info in infos])
    ends = DATA["update:terminated"] | DATA["update:truncated"]
    np.testing.assert_array_equal(np.transpose(dones).reshape(-1), ends)
    np.testing.assert_array_equal(np.transpose(truncated).reshape(-1), DATA["update:truncated"])


@pytest.mark.parametrize("layout", ["hwc", "chw"])
@pytest.mark.parametrize("kind, prefix, features", TOWERS, ids=[t[0] for t in TOWERS])
def test_nature_cnn_features_equal_sb3s(layout, kind, prefix, features):
    shape, images = (SHAPE_HWC, DATA["obs_hwc"]) if layout == "hwc" else (SHAPE_CHW, DATA["obs_chw"])
    tower = _nature_cnn(shape)
    assign(tower_pairs(tower, DATA, prefix))
    got = tower(tf.constant(images.astype(np.float32) / 255.0)).numpy()
    assert got.shape == DATA[features].shape == (16, 512)
    _close(got, DATA[features])


@pytest.mark.parametrize("layout", ["hwc", "chw"])
def test_extractor_factory_reads_flat_uint8_images_as_sb3(layout):
    """`Preprocessed`: flat uint8 rows -> the space's shape, / 255 -> NatureCNN, as SB3's preprocess_obs."""
    shape, images = (SHAPE_HWC, DATA["obs_hwc"]) if layout == "hwc" else (SHAPE_CHW, DATA["obs_chw"])
    layer = extractors.extractor_factory("nature_cnn", gym.spaces.Box(0, 255, shape, np.uint8))()
    flat = images.reshape(len(images), -1)
    layer(tf.constant(flat[:1]))
    assign(tower_pairs(layer.extractor, DATA, "shared.features_extractor"))
    _close(layer(tf.constant(flat)).numpy(), DATA["shared:features"])


def test_the_fixture_tells_a_wrong_flatten_order():
    """The 1x2 feature map makes the Linear's row order matter: the plain transpose (torch's CHW order) is off."""
    tower = _nature_cnn(SHAPE_HWC)
    assign(tower_pairs(tower, DATA, "shared.features_extractor", permute=False))
    got = tower(tf.constant(DATA["obs_hwc"].astype(np.float32) / 255.0)).numpy()
    error = np.abs(got - DATA["shared:features"]).max()
    assert error > 1e-2 * np.abs(DATA["shared:features"]).max(), error


def _model(shared: bool, **kwargs) -> kppo.PPO:
    return kppo.PPO(
        "CnnPolicy",
        kppo.make_vec_env(BlockImageEnv, n_envs=int(DATA["n_envs"]), seed=0),
        policy_kwargs=None if shared else dict(share_features_extractor=False),
        seed=0,
        **kwargs,
    )


@pytest.mark.parametrize("kind", ["shared", "separate"])
def test_kppo_cnn_policy_forward_equals_sb3s(kind):
    model = _model(kind == "shared")
    agent = model.agent
    assert (agent.critic.extractor is agent.actor.extractor) == (kind == "shared")
    pairs = agent_pairs(agent, DATA, kind)
    assert {id(v) for v, _ in pairs} == {id(v) for v in agent.variables}, "a kppo weight has no SB3 counterpart"
    assign(pairs)
    obs = tf.constant(DATA["obs_hwc"].reshape(len(DATA["obs_hwc"]), -1))
    logits = agent.actor(obs).numpy()
    _close(logits, DATA[f"{kind}:logits"])
    _close(tf.nn.log_softmax(logits).numpy(), DATA[f"{kind}:log_probs"])
    _close(np.reshape(agent.critic(obs).numpy(), [-1]), DATA[f"{kind}:values"])
    actions, _ = model.predict(DATA["obs_hwc"], deterministic=True)
    np.testing.assert_array_equal(np.reshape(actions, [-1]), DATA[f"{kind}:log_probs"].argmax(1))


def _update_model() -> kppo.PPO:
    return _model(
        True,
        n_steps=int(DATA["n_steps"]),
        batch_size=int(DATA["batch_size"]),
        n_epochs=int(DATA["n_epochs"]),
        learning_rate=float(DATA["learning_rate"]),
        gamma=float(DATA["gamma"]),
        gae_lambda=float(DATA["gae_lambda"]),
        clip_range=float(DATA["clip_range"]),
        ent_coef=float(DATA["ent_coef"]),
        vf_coef=float(DATA["vf_coef"]),
        max_grad_norm=float(DATA["max_grad_norm"]),
    )


def test_one_update_of_kppo_cnn_policy_equals_sb3s():
    model = _update_model()
    agent = model.agent
    assert (model.config.adam_style, model.config.advantage_std_ddof) == ("torch", 1)
    assign(agent_pairs(agent, DATA, "shared"))
    settings = update_settings(model.config)
    step = tf.function(lambda mb: minibatch_step(agent, settings, mb), autograph=False)
    obs = DATA["update:obs"].reshape(len(DATA["update:obs"]), -1)
    actions = DATA["update:actions"].reshape((len(obs), *agent.dist.action_shape))
    batch = Batch(
        obs,
        actions.astype(agent.dist.action_dtype.as_numpy_dtype),
        DATA["update:old_log_prob"],
        DATA["update:old_values"],
        DATA["update:advantages"],
        DATA["update:returns"],
        np.zeros((len(obs), 0), bool),
    )
    size, results = int(DATA["batch_size"]), []
    for permutation in DATA["update:permutations"]:
        for start in range(0, len(permutation), size):
            rows = permutation[start : start + size]
            info, grad_norm, _ = step(tf.nest.map_structure(lambda x, rows=rows: tf.constant(x[rows]), batch))
            results.append((info, grad_norm))
    close = dict(rtol=1e-6, atol=1e-6)  # measured 3.6e-7 (and 5e-6 with float32 bias corrections, below)
    for field, sb3 in (
        ("policy_loss", "pg_loss"),
        ("value_loss", "value_loss"),
        ("approx_kl", "approx_kl"),
        ("clip_fraction", "clip_fraction"),
        ("total_loss", "loss"),
    ):
        got = [float(getattr(i, field)) for i, _ in results]
        np.testing.assert_allclose(got, DATA[f"update:{sb3}"], err_msg=field, **close)
    np.testing.assert_allclose([-float(i.entropy) for i, _ in results], DATA["update:entropy_loss"], **close)
    # measured 6.7e-7 (3.2e-5 with float32 bias corrections)
    np.testing.assert_allclose([float(g) for _, g in results], DATA["update:grad_norm"], rtol=5e-6)
    for variable, want in agent_pairs(agent, DATA, "after"):  # measured 3.6e-8 (1.1e-7)
        np.testing.assert_allclose(variable.numpy(), want, rtol=0, atol=2e-7, err_msg=variable.path)


def test_torch_adams_first_step_is_torchs():
    """What the update above needs of `adam_style="torch"`: torch.optim.Adam's first step, -lr * g / (|g| + eps)
    (float32 rounding: 1e-7 relative). Bias corrections 1 - beta ** t computed in float32 from float32(0.999) are
    1.3e-5 off, which makes every early step 6.5e-6 too short; the CNN update's gradient norms then drift from SB3's
    by up to 3.2e-5 within 8 steps."""
    variable = tf.Variable(tf.zeros([3]))
    gradient = np.array([-0.0558196, -0.0037095, 0.00052681], np.float32)
    make_optimizer("torch", 3e-4).apply_gradients([(tf.constant(gradient), variable)])
    g = gradient.astype(np.float64)
    np.testing.assert_allclose(variable.numpy(), -3e-4 * g / (np.abs(g) + 1e-5), rtol=1e-6)
