"""Every PPO option: its name, type, default and one-line meaning (`ConfigFields`), and the values derived from them.
`kppo.config.options.Config` is this with construction, validation (`kppo.config.validation`) and YAML."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kppo.config.choices import ACTIVATIONS

__all__ = ["ConfigFields"]


def _f(default: Any, doc: str) -> Any:
    return field(default=default, metadata={"doc": doc})


@dataclass(frozen=True)
class ConfigFields:
    """Every option with its default, type and one-line documentation (`metadata["doc"]`), and the values derived
    from them; `kppo.Config` adds construction, validation and the YAML round trip."""

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
    norm_gamma: float | None = _f(
        None,
        "normalize_reward: the discount of the running return whose std scales the rewards (VecNormalize's gamma); "
        "null: gamma.",
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
        "Compile the rollout with XLA (faster on CPU); a population's whole program, except a recurrent one "
        "(XLA cannot compile what vectorizing the LSTM's gradient loop builds) or a CNN one (slower under XLA).",
    )
    jit_update: bool | None = _f(
        None, "Compile the update with XLA; null: only on gymnasium envs with >= 64 gradient steps, never with a CNN."
    )
    jit_eval: bool | None = _f(
        None,
        "Compile the TF-native evaluation rollout with XLA; null: for populations only (for one run the compile pays "
        "off only over many rounds on CPU; docs/benchmarks/speed.md, 'jit flags').",
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

    def to_dict(self) -> dict[str, Any]:
        """Every field under its kppo name, as a plain dict (`Config(**d)` and `Config.from_dict(d)` read it back)."""
        return dataclasses.asdict(self)
