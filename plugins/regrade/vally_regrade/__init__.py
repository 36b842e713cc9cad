"""``vally grade``: grading saved trials again, with the graders of an eval spec.

A package outside the kernel, like any third-party one: it imports only the public ``vally``
API, and its command is a ``vally.cli`` entry point (:mod:`~vally_regrade.cli`). Modules,
one concept each:

* :mod:`~vally_regrade.formats`: the shapes of saved trials and where a trajectory records
  the one it was read from;
* :mod:`~vally_regrade.saved_trials`: reading saved trials (trial records, trajectories,
  legacy outcomes, ATIF documents) from JSON Lines or one JSON document;
* :mod:`~vally_regrade.atif`: ATIF trajectories mapped onto vally trajectories;
* :mod:`~vally_regrade.matching`: the stimulus each saved trial belongs to;
* :mod:`~vally_regrade.trial_input`: the command's flags checked, standard input spooled and
  scanned before any trial is graded;
* :mod:`~vally_regrade.grading`: the graders applied to each trial, in a workspace sandbox
  when there is one, and the records built;
* :mod:`~vally_regrade.request`: what the command is asked (its options) and returns;
* :mod:`~vally_regrade.regrade`: the whole re-grade as one library call;
* :mod:`~vally_regrade.cli`: the command.
"""
