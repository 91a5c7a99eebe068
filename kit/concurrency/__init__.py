"""The planner's process machinery, apart from its pure stages: a second process for a share
of a solve (`second_core`), work done where the planner would only wait (`idle`), and the
solvers' libraries loaded on another thread while the snapshot is read (`preload`). The first
two hold process-wide state, which `kit plan` sets up around a run; library callers set up
nothing, and the planner then computes everything here, with the same answer."""
