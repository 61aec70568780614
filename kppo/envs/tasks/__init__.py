"""TF-native tasks, each a gymnasium environment reimplemented as a pure batched `kppo.envs.base.Task`."""
