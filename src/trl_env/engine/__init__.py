"""Playing episodes: the batched rollout engine, its config, and safe env calls."""
