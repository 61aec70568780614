"""The PPO update: epochs x shuffled minibatches, global-norm clip, Adam, target-KL stop (`ppo`); the replay of a
recurrent agent's sequences and windows (`recurrent`)."""
