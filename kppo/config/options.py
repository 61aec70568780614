"""`Config`: every PPO option, validated on construction, with YAML round trip and rex/SB3 spellings (`spellings`).

Vocabulary (kppo name <- rex name <- Stable-Baselines3 name):

    learning_rate, lr_schedule     <- LR, ANNEAL_LR              <- learning_rate
    num_envs, num_steps            <- NUM_ENVS, NUM_STEPS        <- n_envs, n_steps
    total_timesteps                <- TOTAL_TIMESTEPS            <- learn(total_timesteps)
    num_epochs, num_minibatches    <- UPDATE_EPOCHS, NUM_MINIBATCHES <- n_epochs, batch_size (= minibatch_size)
    gamma, gae_lambda              <- GAMMA, GAE_LAMBDA          <- gamma, gae_lambda
    clip_range, clip_range_vf      <- CLIP_EPS (clips values too) <- clip_range, clip_range_vf
    clip_schedule                  <- -                          <- clip_range (a schedule, RL-Zoo's lin_X)
    ent_coef, vf_coef, max_grad_norm <- ENT_COEF, VF_COEF, MAX_GRAD_NORM <- same
    ent_schedule                   <- -                          <- ent_coef (a schedule, as learning_rate)
    num_hidden_layers, num_hidden_units, activation, kernel_init
                                   <- NUM_HIDDEN_LAYERS, NUM_HIDDEN_UNITS, HIDDEN_ACTIVATION, KERNEL_INIT_TYPE
    state_independent_std, log_std_init, squash <- STATE_INDEPENDENT_STD, -, SQUASH <- -, log_std_init, squash_output
    normalize_obs, normalize_reward <- NORMALIZE_ENV (both)      <- norm_obs, norm_reward, normalize (both)
    fixed_init, offset_step        <- FIXED_INIT, OFFSET_STEP
    num_eval_envs, eval_freq       <- NUM_EVAL_ENVS, EVAL_FREQ (number of evaluation rounds per run)
    verbose, debug, seed           <- VERBOSE, DEBUG, rng        <- verbose, seed

"rollout" = num_envs x num_steps transitions; `rollout_size` and `minibatch_size` are derived. There is no bare
`batch_size` inside kppo: SB3's `batch_size` is our `minibatch_size` and is translated to `num_minibatches`.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Mapping

import yaml

from kppo.config.spellings import suggest, translate
from kppo.config.values import coerce, load_yaml, read_text, yaml_problem

ACTIVATIONS = ("tanh", "relu", "gelu", "softplus", "swish", "silu", "elu", "selu", "sigmoid", "leaky_relu")
KERNEL_INITS = (
    "orthogonal",
    "glorot_normal",
    "glorot_uniform",
    "he_normal",
    "he_uniform",
    "kaiming_normal",
    "kaiming_uniform",
    "lecun_normal",
    "lecun_uniform",
    "xavier_normal",
    "xavier_uniform",
    "torch_default",
)
SCHEDULES = ("constant", "linear")  # lr_schedule, clip_schedule, ent_schedule (kppo.update.schedules.scheduled)
DISTRIBUTE = ("none", "mirrored", "multi_worker", "tpu")
VF_CLIP_MODES = ("max", "clipped")
ENV_BACKENDS = ("auto", "native", "gymnasium")
OLD_ENV_BACKENDS = {"tf": "native"}  # an older spelling, still read: "native" is the one word for TF-native envs
VECTORIZATIONS = ("sync", "async")
BIAS_INITS = ("zeros", "torch_default")
FEATURES_EXTRACTORS = ("flatten", "cnn", "nature_cnn", "small_cnn", "combined")
ADAM_STYLES = ("keras", "torch")
OPTIMIZERS = ("adam", "adamw", "rmsprop", "rmsprop_tf", "sgd")  # kppo.core.optimizers.OPTIMIZERS


def _f(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class Config:
    """PPO hyperparameters and run settings. Each field's `metadata["doc"]` is its one-line documentation."""

    env: str = _f("CartPole-v1", "Environment id used when `train` is given none (TF-native name or gymnasium id).")
    env_backend: str = _f(
        "auto",
        "'auto': TF-native for built-in names, gymnasium otherwise; 'native' (old spelling: 'tf') or 'gymnasium' to "
        "force one.",
    )
    vectorization: str = _f("sync", "gymnasium envs: 'sync' (one process) or 'async' (one process per env).")
    # --- rollout ---
    num_envs: int = _f(16, "Parallel training environments.")
    num_steps: int = _f(128, "Steps per environment in each rollout.")
    total_timesteps: int = _f(500_000, "Environment steps over the whole run (rounded down to whole rollouts).")
    # --- optimisation ---
    learning_rate: float = _f(2.5e-4, "Adam learning rate (Adam eps is 1e-5).")
    adam_style: str = _f(
        "keras",
        "'keras': Adam's eps added to sqrt(v) before the bias correction (Keras); "
        "'torch': after it (torch.optim.Adam, Stable-Baselines3, optax's scale_by_adam).",
    )
    optimizer: str = _f(
        "adam",
        "'adam' (adam_style), or as torch computes them: 'adamw' (torch.optim.AdamW: decoupled weight_decay), "
        "'rmsprop' (torch.optim.RMSprop), 'rmsprop_tf' (SB3's RMSpropTFLike: eps inside the square root, square "
        "average starting at 1), 'sgd' (torch.optim.SGD).",
    )
    optimizer_eps: float = _f(
        1e-5, "Epsilon of Adam and the RMSprops (SB3's PPO: 1e-5 for Adam; torch's default 1e-8)."
    )
    adam_beta_1: float = _f(0.9, "Adam's first-moment decay (torch's betas[0]).")
    adam_beta_2: float = _f(0.999, "Adam's second-moment decay (torch's betas[1]).")
    rmsprop_alpha: float = _f(0.99, "RMSprop's smoothing constant (torch's alpha, Keras' rho).")
    rmsprop_centered: bool = _f(False, "RMSprop: divide by the gradient's estimated variance (torch's centered).")
    optimizer_momentum: float = _f(0.0, "Momentum of RMSprop and SGD (torch's momentum).")
    sgd_dampening: float = _f(0.0, "SGD: dampening of the momentum (torch's dampening).")
    sgd_nesterov: bool = _f(False, "SGD: Nesterov momentum (torch's nesterov).")
    weight_decay: float = _f(
        0.0,
        "torch's L2 weight decay, added to the gradient (Adam needs adam_style 'torch'); with optimizer 'adamw', "
        "torch.optim.AdamW's decoupled decay (w -= lr * weight_decay * w before the step).",
    )
    lr_schedule: str = _f("linear", "'linear' anneals the learning rate to 0 over the run; 'constant' keeps it.")
    num_epochs: int = _f(4, "Passes over each rollout.")
    num_minibatches: int = _f(4, "Minibatches per epoch; minibatch_size = num_envs * num_steps / num_minibatches.")
    max_grad_norm: float = _f(0.5, "Clip the gradient by this global norm (all parameters together).")
    target_kl: float | None = _f(None, "Stop the epochs of an update once approx KL > 1.5 * target_kl (None: never).")
    # --- PPO objective ---
    gamma: float = _f(0.99, "Discount factor.")
    gae_lambda: float = _f(0.95, "GAE lambda (bias/variance trade-off).")
    clip_range: float = _f(0.2, "PPO ratio clip epsilon.")
    clip_schedule: str = _f(
        "constant",
        "'linear' anneals clip_range to 0 over the run as lr_schedule anneals the learning rate (RL-Zoo's "
        "lin_<clip_range>); 'constant' keeps it. clip_range_vf is not scheduled (SB3 schedules it on its own).",
    )
    clip_range_vf: float | None = _f(
        0.2, "Clip value updates to +-this around the old values (None: no clipping; rex clips with CLIP_EPS)."
    )
    vf_clip_mode: str = _f(
        "max",
        "With clip_range_vf: 'max' = max(unclipped, clipped) squared error (rex/purejaxrl/CleanRL); "
        "'clipped' = clipped prediction only (Stable-Baselines3).",
    )
    normalize_advantage: bool = _f(True, "Normalize advantages per minibatch (mean 0, std 1).")
    advantage_std_ddof: int = _f(0, "Advantage normalization's std: 0 population (purejaxrl, CleanRL), 1 sample (SB3).")
    ent_coef: float = _f(0.01, "Entropy bonus coefficient.")
    ent_schedule: str = _f(
        "constant",
        "'linear' anneals ent_coef to 0 over the run as lr_schedule anneals the learning rate (RL-Zoo's "
        "lin_<ent_coef>, kppo.PPO's ent_coef schedule); 'constant' keeps it.",
    )
    vf_coef: float = _f(0.5, "Value loss coefficient (value loss = mean squared error, as SB3).")
    # --- networks ---
    num_hidden_layers: int = _f(2, "Hidden layers in each of the actor and critic towers.")
    num_hidden_units: int = _f(64, "Units per hidden layer.")
    actor_hidden_units: tuple[int, ...] | None = _f(
        None, "Actor hidden widths, e.g. [256, 128]; overrides num_hidden_layers/units (SB3 net_arch pi)."
    )
    critic_hidden_units: tuple[int, ...] | None = _f(
        None, "Critic hidden widths; overrides num_hidden_layers/units (SB3 net_arch vf)."
    )
    activation: str = _f("tanh", f"Hidden activation: one of {', '.join(ACTIVATIONS)}.")
    kernel_init: str = _f(
        "orthogonal",
        "'orthogonal' (gains sqrt(2) hidden, 0.01 policy head, 1 value head) or a Keras initializer name "
        "(glorot/he/kaiming/lecun/xavier x normal/uniform), or 'torch_default' (torch.nn.Linear's U(+-1/sqrt(fan_in)) "
        "kernels, SB3's ortho_init=False).",
    )
    bias_init: str = _f(
        "zeros", "'zeros', or 'torch_default': torch.nn.Linear's U(+-1/sqrt(fan_in)) (SB3's ortho_init=False)."
    )
    features_extractor: str = _f(
        "flatten",
        "What the actor and critic read observations through: 'flatten' (the MLP reads them flat), 'cnn' (NatureCNN, "
        "or SmallCNN for images under 36 px), 'nature_cnn', 'small_cnn', or 'combined' (Dict: a CNN per image key, "
        "the other keys flat; SB3's CombinedExtractor).",
    )
    features_dim: int | None = _f(
        None, "Features of the extractor (null: its default: NatureCNN 512, SmallCNN 128, 'combined' 256 per image)."
    )
    normalize_images: bool = _f(True, "Divide uint8 images by 255 inside the networks (SB3's normalize_images).")
    share_features_extractor: bool = _f(
        True, "One features extractor for the actor and the critic (SB3's PPO default), else one each."
    )
    state_independent_std: bool = _f(True, "Gaussian log-std is a free parameter (else a head on the features).")
    log_std_init: float = _f(0.0, "Initial log standard deviation of the Gaussian policy.")
    squash: bool = _f(False, "tanh-squash Box actions (sample stored pre-tanh); else clip to [-1, 1]. Then rescale.")
    box_actions: str = _f(
        "rescale",
        "unsquashed Box actions: 'rescale' (clip to [-1, 1], map to [low, high]) or 'clip' (clip to [low, high]: SB3, "
        "CleanRL, purejaxrl).",
    )
    use_sde: bool = _f(False, "generalized State-Dependent Exploration (Box actions): noise = latent @ eps.")
    sde_sample_freq: int = _f(-1, "gSDE: redraw the exploration matrices every N steps (-1: once per rollout).")
    full_std: bool = _f(True, "gSDE: one std per (latent, action) pair (else one per latent feature).")
    use_expln: bool = _f(
        False,
        "gSDE: the std from log_std by SB3's expln (exp below 0, log1p(x) + 1 above: grows slowly) instead of exp.",
    )
    recurrent: str | None = _f(
        None,
        "Recurrent policy: 'lstm' (an LSTM before the actor's MLP, sb3-contrib's MlpLstmPolicy) or null; minibatches: "
        "lstm_batching.",
    )
    lstm_hidden_size: int = _f(256, "Units of the LSTM (recurrent='lstm'; sb3-contrib's default 256).")
    n_lstm_layers: int = _f(
        1, "recurrent: stacked LSTM layers (sb3-contrib's n_lstm_layers), each lstm_hidden_size units, in every LSTM."
    )
    lstm_sequence_length: int = _f(
        0,
        "recurrent: update on chunks of this many steps of one env, each replayed from the memory stored at its first "
        "step (0: whole rollouts, purejaxrl's ppo_rnn); must divide num_steps.",
    )
    lstm_batching: str = _f(
        "sequences",
        "recurrent minibatches: 'sequences' (whole env sequences or lstm_sequence_length chunks, shuffled; purejaxrl) "
        "or 'rotated' (sb3-contrib: each epoch the env-major rollout rotated by a random offset and cut, in order, "
        "into num_minibatches windows of consecutive steps).",
    )
    enable_critic_lstm: bool = _f(
        True, "recurrent: the critic has its own LSTM (else an MLP on the observation), as sb3-contrib."
    )
    shared_lstm: bool = _f(
        False,
        "recurrent: the critic reads the actor's LSTM output without backpropagating into it (sb3-contrib's "
        "shared_lstm; enable_critic_lstm must be False).",
    )
    action_masks: bool = _f(
        False,
        "Act with the env's invalid-action masks (Discrete/MultiDiscrete; sb3-contrib's MaskablePPO): "
        "env.action_masks(), info['action_mask'] or a TF-native task's action_mask(state); kept in the rollout for "
        "the update, and an input of exported artifacts.",
    )
    # --- normalization and env options ---
    normalize_obs: bool = _f(False, "Running mean/std observation normalization (clipped to +-clip_obs).")
    normalize_obs_keys: tuple[str, ...] | None = _f(
        None,
        "Dict observations: the keys normalize_obs applies to (SB3's norm_obs_keys); null: every key but the images "
        "(an image is divided by 255 in the network, never standardized).",
    )
    normalize_reward: bool = _f(False, "Scale rewards by the std of the discounted return (clipped to +-clip_reward).")
    clip_obs: float = _f(10.0, "normalize_obs: normalized observations are clipped to +-this (SB3's VecNormalize).")
    clip_reward: float = _f(10.0, "normalize_reward: scaled rewards are clipped to +-this (SB3's VecNormalize).")
    norm_epsilon: float = _f(
        1e-8, "Added to the variances under the square roots of both normalizations (VecNormalize's epsilon)."
    )
    fixed_init: bool = _f(False, "Each training env restarts from its own once-sampled initial state.")
    offset_step: bool = _f(False, "Stagger env step counters so time-limit truncations do not coincide.")
    atari_wrapper: bool = _f(
        False,
        "gymnasium ALE ids (e.g. PongNoFrameskip-v4): each env in SB3's AtariWrapper (no-op starts, 4-frame skip, a "
        "lost life ends the episode, FIRE reset, 84x84 grey, reward sign) over a Monitor, as make_atari_env does.",
    )
    frame_stack: int = _f(
        1,
        "gymnasium env ids: each env's last N observations stacked on the channel axis, zeros before an episode's "
        "first (SB3's VecFrameStack, RL-Zoo's frame_stack); 1: none.",
    )
    # --- evaluation and logging ---
    num_eval_envs: int = _f(16, "Evaluation environments (one deterministic episode each per evaluation).")
    eval_freq: int = _f(
        10, "Evaluation rounds per run (rex EVAL_FREQ; at most one per iteration): the run is split into rounds."
    )
    verbose: int = _f(0, "0 silent, 1 print one line per evaluation round, 2 also debug output.")
    debug: bool = _f(
        False, "Print episode statistics after every compiled call (rex DEBUG; per update with iterations_per_call=1)."
    )
    seed: int = _f(0, "Random seed (stateless RNG; same seed, same jit flags -> identical run on CPU).")
    # --- compilation ---
    jit_rollout: bool = _f(
        True,
        "Compile the rollout with XLA (measured faster on CPU); a population's whole program, except a recurrent one "
        "(XLA cannot compile what vectorizing the LSTM's gradient loop builds) or a CNN one (6x slower under XLA).",
    )
    jit_update: bool | None = _f(
        None, "Compile the update with XLA; null: only on gymnasium envs with >= 64 gradient steps, never with a CNN."
    )
    jit_eval: bool | None = _f(
        None,
        "Compile the TF-native evaluation rollout with XLA; null: for populations only (one run: pays off only beyond "
        "~30 rounds on CPU; a population: 0.02 vs 0.40 s a round for 8 members).",
    )
    distribute: str = _f(
        "none",
        "'none' (one device), 'mirrored' (MirroredStrategy over `devices`), 'multi_worker' "
        "(MultiWorkerMirroredStrategy from TF_CONFIG) or 'tpu' (TPUStrategy; TPU_NAME or the local TPU VM).",
    )
    devices: tuple[str, ...] | None = _f(None, "Devices for 'mirrored', e.g. ['/cpu:0', '/cpu:1'] (default: all GPUs).")
    checkpoint_every: int = _f(0, "With a checkpoint directory: also checkpoint every N iterations (0: at round ends).")
    iterations_per_call: int = _f(
        16,
        "Training iterations (rollout + GAE + update) per compiled call (fewer host round trips; debug prints per "
        "call).",
    )

    def __new__(cls, *args: Any, **kwargs: Any) -> Config:
        """Refuses an unknown field name in one line, with the nearest known one (the dataclass's own TypeError
        quotes the name raw, a newline in it included)."""
        del args
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = [name for name in kwargs if name not in names]
        if unknown:
            raise TypeError(f"Config: unknown field {unknown[0]!r} ({suggest(str(unknown[0]), names)})")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, coerce(f.name, f.type, getattr(self, f.name)))
        object.__setattr__(self, "env_backend", OLD_ENV_BACKENDS.get(self.env_backend, self.env_backend))
        _validate(self)

    # --- derived values ---
    @property
    def rollout_size(self) -> int:
        """Transitions per rollout: num_envs * num_steps."""
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        """Transitions per minibatch (SB3's `batch_size`)."""
        return self.rollout_size // self.num_minibatches

    @property
    def num_iterations(self) -> int:
        """Training iterations (rollout + update) in the run."""
        return self.total_timesteps // self.rollout_size

    @property
    def eval_rounds(self) -> int:
        """`eval_freq`, at most one round per iteration (a short run evaluates less often, as SB3's EvalCallback)."""
        return min(self.eval_freq, self.num_iterations)

    # --- construction from other spellings ---
    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Config:
        """Builds a Config from kppo, rex (UPPER_CASE) or SB3 names; an unknown key is a ValueError naming it."""
        return cls(**translate(values, Config.__dataclass_fields__))

    @classmethod
    def from_yaml(cls, path_or_text: str | Path) -> Config:
        """Reads a YAML mapping (a path, or YAML text containing a newline or colon); errors name the file and line."""
        text, source = read_text(path_or_text)
        try:
            values = load_yaml(text)
        except yaml.YAMLError as err:
            raise ValueError(f"config YAML {source}: could not parse {yaml_problem(err)}") from None
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise ValueError(f"config YAML {source}: expected a mapping of option: value, got {type(values).__name__}")
        if source == "text":  # YAML text: its errors are the options' own
            return cls.from_dict(values)
        try:
            return cls.from_dict(values)
        except ValueError as err:  # a file: its errors name it
            raise ValueError(f"config YAML {source}: {str(err).removeprefix('config: ')}") from None

    def to_dict(self) -> dict[str, Any]:
        """Every field under its kppo name, as a plain dict (`Config(**d)` and `Config.from_dict(d)` read it back)."""
        return dataclasses.asdict(self)

    def to_yaml(self, path: str | Path | None = None) -> str:
        """Dumps all fields under kppo names; writes to `path` if given. Returns the YAML text."""
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            Path(path).write_text(text)
        return text

    def replace(self, **changes: Any) -> Config:
        """A copy with `changes` applied (any spelling), validated again."""
        merged = self.to_dict()
        merged.update(translate(changes, Config.__dataclass_fields__, base=merged))
        return Config(**merged)

    def sweep(self, **values: list) -> Sweep:
        """A grid over per-member hyperparameters (`SWEEPABLE`, any spelling), e.g.
        `config.sweep(learning_rate=[1e-4, 3e-4], ent_coef=[0.0, 0.01])`: 4 settings, each trained for every seed of
        `kppo.train(env, sweep, seed=[...])` in one compiled program."""
        grid = {}
        for name, options in translate(values, Config.__dataclass_fields__).items():
            _check(name in SWEEPABLE, "sweep", f"fields among {', '.join(SWEEPABLE)}", name)
            options = list(options) if isinstance(options, (list, tuple)) else [options]
            _check(len(options) > 0, f"sweep.{name}", "a non-empty list of values", options)
            grid[name] = [self.replace(**{name: v}).to_dict()[name] for v in options]  # validated, coerced
        return Sweep(self, grid)

    @classmethod
    def field_docs(cls) -> dict[str, str]:
        """Field name -> one-line documentation (CLI help, docs)."""
        return {f.name: f.metadata["doc"] for f in dataclasses.fields(cls)}


#: The fields a population's members may differ in (besides `seed`); everything else is shared (shapes, networks).
SWEEPABLE = ("learning_rate", "ent_coef", "clip_range", "gamma", "gae_lambda", "vf_coef", "max_grad_norm")


@dataclass(frozen=True)
class Sweep:
    """`Config.sweep`'s grid: the base config and, per swept field, its values (the grid is their product)."""

    config: Config
    grid: dict[str, list]

    def settings(self) -> list[dict[str, Any]]:
        """One dict of swept values per grid point (the last field varies fastest)."""
        return [dict(zip(self.grid, point)) for point in itertools.product(*self.grid.values())]

    def members(self, seeds: list[int]) -> list[Config]:
        """Every grid point with every seed (seeds vary fastest)."""
        return [self.config.replace(**point, seed=seed) for point in self.settings() for seed in seeds]


# ---------------------------------------------------------------------------------------------------------------
# Coercion and validation
# ---------------------------------------------------------------------------------------------------------------


def _check(ok: bool, name: str, expected: str, got: Any) -> None:
    if not ok:
        raise ValueError(f"{name}: expected {expected}, got {got!r}")


def _validate(c: Config) -> None:
    for name in (
        "num_envs",
        "num_steps",
        "num_epochs",
        "num_minibatches",
        "num_hidden_units",
        "num_eval_envs",
        "eval_freq",
        "iterations_per_call",
        "frame_stack",
    ):
        _check(getattr(c, name) >= 1, name, "an integer >= 1", getattr(c, name))
    _check(c.distribute in DISTRIBUTE, "distribute", f"one of {DISTRIBUTE}", c.distribute)
    _check(c.checkpoint_every >= 0, "checkpoint_every", "an integer >= 0", c.checkpoint_every)
    _check(c.num_hidden_layers >= 0, "num_hidden_layers", "an integer >= 0", c.num_hidden_layers)
    _check(c.learning_rate > 0, "learning_rate", "a positive number", c.learning_rate)
    for name in ("lr_schedule", "clip_schedule", "ent_schedule"):
        _check(getattr(c, name) in SCHEDULES, name, f"one of {SCHEDULES}", getattr(c, name))
    _check(0 <= c.gamma <= 1, "gamma", "a number in [0, 1]", c.gamma)
    _check(0 <= c.gae_lambda <= 1, "gae_lambda", "a number in [0, 1]", c.gae_lambda)
    _check(c.clip_range > 0, "clip_range", "a positive number", c.clip_range)
    for name in ("clip_obs", "clip_reward", "norm_epsilon"):
        _check(getattr(c, name) > 0, name, "a positive number", getattr(c, name))
    if c.clip_range_vf is not None:
        _check(c.clip_range_vf > 0, "clip_range_vf", "a positive number or None", c.clip_range_vf)
    _check(c.env_backend in ENV_BACKENDS, "env_backend", f"one of {ENV_BACKENDS}", c.env_backend)
    _check(c.vectorization in VECTORIZATIONS, "vectorization", f"one of {VECTORIZATIONS}", c.vectorization)
    _check(c.vf_clip_mode in VF_CLIP_MODES, "vf_clip_mode", f"one of {VF_CLIP_MODES}", c.vf_clip_mode)
    if c.target_kl is not None:
        _check(c.target_kl > 0, "target_kl", "a positive number or None", c.target_kl)
    for name in ("ent_coef", "vf_coef"):
        _check(getattr(c, name) >= 0, name, "a number >= 0", getattr(c, name))
    _check(c.max_grad_norm > 0, "max_grad_norm", "a positive number", c.max_grad_norm)
    _check(c.activation in ACTIVATIONS, "activation", f"one of {ACTIVATIONS}", c.activation)
    _check(c.kernel_init in KERNEL_INITS, "kernel_init", f"one of {KERNEL_INITS}", c.kernel_init)
    _check(c.bias_init in BIAS_INITS, "bias_init", f"one of {BIAS_INITS}", c.bias_init)
    _check(c.adam_style in ADAM_STYLES, "adam_style", f"one of {ADAM_STYLES}", c.adam_style)
    _check(c.optimizer in OPTIMIZERS, "optimizer", f"one of {OPTIMIZERS}", c.optimizer)
    _check(c.optimizer_eps >= 0, "optimizer_eps", "a number >= 0", c.optimizer_eps)
    for name in ("adam_beta_1", "adam_beta_2"):
        _check(0 <= getattr(c, name) < 1, name, "a number in [0, 1)", getattr(c, name))
    _check(0 <= c.sgd_dampening <= 1, "sgd_dampening", "a number in [0, 1]", c.sgd_dampening)
    _check(0 <= c.rmsprop_alpha <= 1, "rmsprop_alpha", "a number in [0, 1]", c.rmsprop_alpha)
    _check(c.optimizer_momentum >= 0, "optimizer_momentum", "a number >= 0", c.optimizer_momentum)
    _check(c.weight_decay >= 0, "weight_decay", "a number >= 0", c.weight_decay)
    _check(
        c.weight_decay == 0 or c.optimizer != "adam" or c.adam_style == "torch",
        "weight_decay",
        "0 with adam_style 'keras' (torch's L2 term is built for adam_style 'torch')",
        c.weight_decay,
    )
    _check(
        not c.sgd_nesterov or (c.optimizer_momentum > 0 and c.sgd_dampening == 0),
        "sgd_nesterov",
        "False unless optimizer_momentum > 0 and sgd_dampening == 0 (as torch.optim.SGD)",
        c.sgd_nesterov,
    )
    _check(c.advantage_std_ddof in (0, 1), "advantage_std_ddof", "0 or 1", c.advantage_std_ddof)
    _check(c.verbose in (0, 1, 2), "verbose", "0, 1 or 2", c.verbose)
    _check(c.seed >= 0, "seed", "an integer >= 0", c.seed)
    _check(
        c.sde_sample_freq == -1 or c.sde_sample_freq >= 1, "sde_sample_freq", "-1 or an integer >= 1", c.sde_sample_freq
    )
    _check(
        c.rollout_size > 1 or not c.normalize_advantage,
        "num_envs * num_steps",
        "more than 1 with normalize_advantage=True (advantage normalization)",
        c.rollout_size,
    )
    _check(
        c.rollout_size % c.num_minibatches == 0,
        "num_minibatches",
        f"a divisor of num_envs * num_steps = {c.rollout_size}",
        c.num_minibatches,
    )
    _check(
        c.box_actions in ("rescale", "clip") and not (c.squash and c.box_actions == "clip"),
        "box_actions",
        "'rescale' or 'clip' ('rescale' with squash: tanh, then [low, high])",
        c.box_actions,
    )
    _check(c.recurrent in (None, "lstm"), "recurrent", "null or 'lstm'", c.recurrent)
    _check(
        c.features_extractor in FEATURES_EXTRACTORS,
        "features_extractor",
        f"one of {FEATURES_EXTRACTORS}",
        c.features_extractor,
    )
    _check(c.features_dim is None or c.features_dim >= 1, "features_dim", "null or an integer >= 1", c.features_dim)
    _check(
        c.recurrent is None or c.features_extractor == "flatten" or c.share_features_extractor,
        "share_features_extractor",
        f"True for a recurrent policy with features_extractor={c.features_extractor!r} (its LSTMs read one extractor)",
        c.share_features_extractor,
    )
    _check(c.lstm_hidden_size >= 1, "lstm_hidden_size", "an integer >= 1", c.lstm_hidden_size)
    _check(c.n_lstm_layers >= 1, "n_lstm_layers", "an integer >= 1", c.n_lstm_layers)
    _check(
        c.lstm_sequence_length >= 0 and (c.lstm_sequence_length == 0 or c.num_steps % c.lstm_sequence_length == 0),
        "lstm_sequence_length",
        f"0 or a divisor of num_steps = {c.num_steps}",
        c.lstm_sequence_length,
    )
    if c.recurrent is not None:
        _check(
            c.lstm_batching in ("sequences", "rotated"), "lstm_batching", "'sequences' or 'rotated'", c.lstm_batching
        )
        _check(
            not (c.shared_lstm and c.enable_critic_lstm),
            "shared_lstm",
            "False with enable_critic_lstm=True (the critic's LSTM is shared, its own, or none: sb3-contrib asserts)",
            c.shared_lstm,
        )
        _check(
            c.lstm_batching == "sequences" or c.lstm_sequence_length == 0,
            "lstm_sequence_length",
            "0 with lstm_batching='rotated' (its windows are num_envs * num_steps / num_minibatches steps)",
            c.lstm_sequence_length,
        )
        sequences = c.num_envs * (c.num_steps // (c.lstm_sequence_length or c.num_steps))
        _check(
            c.lstm_batching == "rotated" or sequences % c.num_minibatches == 0,
            "num_minibatches",
            f"a divisor of the {sequences} sequences (num_envs x num_steps / lstm_sequence_length; recurrent "
            f"minibatches are whole sequences)",
            c.num_minibatches,
        )
    _check(
        c.total_timesteps >= c.rollout_size,
        "total_timesteps",
        f"at least one rollout (num_envs * num_steps = {c.rollout_size})",
        c.total_timesteps,
    )
