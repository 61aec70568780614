"""Training: `kppo.train` and the one training loop (`train`), its plan and hooks (`plan`, `hooks`), what it returns
(`results`), the runners for each kind of environment (`runners`), metrics, checkpoints and resume (`resume`)."""
