"""Layer 1, the pure parts every path shares: the records of the compiled loops (`types`), GAE, PPO losses,
normalization, action distributions, optimizers, TF loop helpers (`tf_loops`), the tf.distribute rules, error text."""
