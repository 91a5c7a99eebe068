"""The planner's stages, in the order `kit.plan.pipeline` runs them: place, count balance,
exact refinement, leadership, spare copies."""
