"""Hyperparameter search on Optuna (`kppo tune`, `kppo.tune`): search spaces, studies in shared storage, trials
batched as compiled populations, and population-based training."""
