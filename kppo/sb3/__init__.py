"""The Stable-Baselines3 facade: `PPO`, `RecurrentPPO`, `MaskablePPO`, SB3 argument translation, `VecNormalize`,
SB3's logger."""
