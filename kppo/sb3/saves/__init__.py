"""Reading the models and statistics Stable-Baselines3 saves (zips, `policy.pth`, `vec_normalize.pkl`) as data:
without torch, without pickle."""
