"""From specs to figures: the terms, per-replica and per-GPU figures, time, cost and energy, the
estimate and its result, the largest fit, the planner's search, and measured mode."""
