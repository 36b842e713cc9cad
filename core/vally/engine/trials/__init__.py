"""Running trials: a run's plugins built from its plan, the scheduler and the run engine, one
trial's phases (workspace, executor, graders), budgets, the judge cache and remote nodes."""
