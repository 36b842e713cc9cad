"""The run engine: everything a run needs between loaded specs and written records.

Its layers, each importing only the ones below it:

- ``experiment_hooks``: what ``vally experiment run`` asks of hook plugins (the
  ``--until-decided`` gate, the decision after the run);
- ``evals``, ``experiments``, ``run``, ``options``: a run from request to result;
- :mod:`vally.engine.shards`: splitting a run across machines, sealing and merging shards;
- :mod:`vally.engine.trials`: a run's plugins, the scheduler, one trial's phases, budgets;
- :mod:`vally.engine.planning`: the plan of trials, what each measured, resuming;
- :mod:`vally.engine.records`: run folders, records, verdicts, scores and tallies.

Imports the plugin system, spec loading, contracts, models and errors; never the CLI.
"""
