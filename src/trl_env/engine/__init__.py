"""Playing episodes: the batched rollout engine, its config, its schedules, tree rollouts and the fault policy."""
