"""Playing episodes: the batched engine, its config, and safe env calls."""
