"""Rollouts: compiled rollouts of TF-native envs (`native`) and gymnasium rollouts acting in numpy (`gymnasium`),
both ending in GAE."""
