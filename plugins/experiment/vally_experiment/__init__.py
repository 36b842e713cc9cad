"""``vally experiment``: an eval set run across variants, and the shards of a sharded run
merged back into one.

A package outside the kernel, like any third-party one: it imports only the public ``vally``
API. Its command group is a ``vally.cli`` entry point (:mod:`~vally_experiment.cli`), and the
seal of a finished shard a ``vally.hooks`` plugin (:mod:`~vally_experiment.hooks`). The run
itself is the kernel's (:func:`vally.run_experiment`). Modules, one concept each:

* :mod:`~vally_experiment.cli`: the flags of ``experiment run`` and ``experiment merge``;
* :mod:`~vally_experiment.commands`: what the two commands do once their flags are parsed,
  and why they exit as they do;
* :mod:`~vally_experiment.validation`: shard folders read back and checked before a merge
  (missing, duplicated, of another run or plan, unfinished, not a partition of the plan);
* :mod:`~vally_experiment.seal`: the seal a finished shard gets, which lets a merge copy it
  without reading every record;
* :mod:`~vally_experiment.merge`: the shards' results, summaries and report merged into one
  run folder;
* :mod:`~vally_experiment.hooks`: the hook plugin ``shards`` that seals finished shards.
"""
