"""The planner's process machinery, apart from its pure stages: a second process for a share
of a solve (`second_core`) and work done where the planner would only wait (`idle`). Both
hold process-wide state, which `kit plan` sets up around a run; library callers set up
nothing, and the planner then computes everything here, with the same answer."""
