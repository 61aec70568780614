"""Gymnasium environments stepped on the host: the spaces kppo accepts, vector envs in SAME_STEP auto-reset,
their metadata and infos, action masks, one-line errors about envs, and SB3's `evaluate_policy`."""
