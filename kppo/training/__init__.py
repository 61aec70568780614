"""Training: `kppo.train` (`train`), the one training loop (`loop`), the runners for each kind of environment
(`runners`), metrics."""
