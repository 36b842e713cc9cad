"""vally's comparison of runs and its statistics: the graded comparison of two runs case by
case (no model), promotion rules over it, the LLM-judged pairwise comparison on top, the
sequential gate of ``--until-decided`` and the statistics behind every interval and test.

A package outside the kernel, like any third-party one: it imports only the public ``vally``
API. It plugs in twice: ``vally compare`` is a ``vally.cli`` entry point
(:mod:`~vally_compare.cli`), and ``compare``, a hook plugin (group ``vally.hooks``,
:mod:`~vally_compare.hooks`), gives ``vally experiment run`` its promotion decisions, its
``--compare`` and its ``--until-decided``. Modules, one concept each:

* :mod:`~vally_compare.statistics`: pure statistics (estimates, the sign-flip test and its
  interval, decisions, power, multiplicity, agreement, the sequential test); no I/O;
* :mod:`~vally_compare.graded_tally` and :mod:`~vally_compare.graded`: one run's records
  folded into a tally, two tallies compared (figures, cases, groups);
* :mod:`~vally_compare.rules`: promotion rules read against a graded comparison;
* :mod:`~vally_compare.graded_run`, :mod:`~vally_compare.graded_records` and
  :mod:`~vally_compare.graded_text`: runs on disk, the ``graded-comparison`` record, the
  console text;
* :mod:`~vally_compare.judged` (results), :mod:`~vally_compare.judged_pairs` (judging a
  pair), :mod:`~vally_compare.judged_record` (the ``--output`` record),
  :mod:`~vally_compare.judged_tally`, :mod:`~vally_compare.judged_stream`,
  :mod:`~vally_compare.pair_index` and :mod:`~vally_compare.judged_text`: the judged
  comparison, in memory or pair by pair from two files;
* :mod:`~vally_compare.run`: a comparison request run end to end (``vally compare``);
* :mod:`~vally_compare.experiment_decisions` and :mod:`~vally_compare.experiment_judge`: an
  experiment's variants decided by its promotion rules, the judge of ``--compare``;
* :mod:`~vally_compare.sequential_gate`: the gate of ``--until-decided``;
* :mod:`~vally_compare.pass_rates`: stimulus-level pass rates for the experiment table.

The names imported in the ``if TYPE_CHECKING:`` block below are this package's public
API, each imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vally import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__)


if TYPE_CHECKING:  # pragma: no cover - static re-exports for type checkers
    from vally_compare.graded import (
        RunTally as RunTally,
        compare_tallies as compare_tallies,
    )
    from vally_compare.graded_records import comparison_json as comparison_json
    from vally_compare.judged import (
        ComparisonResult as ComparisonResult,
        PairResult as PairResult,
    )
    from vally_compare.judged_pairs import (
        CompareOptions as CompareOptions,
        compare_runs as compare_runs,
        judge_pair as judge_pair,
    )
    from vally_compare.pass_rates import (
        mean_rate as mean_rate,
        pass_rate_deltas as pass_rate_deltas,
        stimulus_pass_rates as stimulus_pass_rates,
    )
    from vally_compare.statistics.estimates import (
        Estimate as Estimate,
        mcnemar_from_pairs as mcnemar_from_pairs,
        metric_delta as metric_delta,
    )
