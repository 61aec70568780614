"""Stable-Baselines3's env API over gymnasium vector envs: `VecEnv` and its wrappers, `make_vec_env`, `Monitor`, the
Atari wrappers, the frame stack and transpose, `evaluate_policy` (public as `kppo.<name>`, SB3's names)."""
