"""The planner's actions, one module each: what `kit plan ACTION` makes (facade: `kit.plan`)."""
