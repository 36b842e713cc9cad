"""``vally lint``: static checks of eval specs and skills; no agent runs.

Each finding is a :class:`Diagnostic` with a stable code:

========================================  ========  ================================================
code                                      severity  catches
========================================  ========  ================================================
``invalid-spec``                          error     YAML syntax, schema, param or duration errors
``unknown-grader-type``                   error     a grader type not installed (did-you-mean)
``invalid-grader-config``                 error     a ``config:`` the grader's ``Config`` rejects
``grader-unavailable``                    error     an installed grader that fails to load
``invalid-scoring-weight-key``            error     a ``scoring.weights`` key no grader type uses
``invalid-constraint-value``              error     negative limits; an item both expected and
                                                    rejected
``environment-file-not-found``            error     ``files[].src`` or a skill folder is missing
``path-escape``                           error     a ``files[].dest`` or ``artifacts`` entry leaves
                                                    the workspace
``duplicate-stimulus-name``               error     two stimuli share a name
``duplicate-grader-type-in-stimulus``     warning   one grader type twice in a stimulus (shared
                                                    weight key)
``rubric-without-llm-judge``              warning   a ``rubric`` but no grader that needs an LLM
``unknown-executor``                      error     ``defaults.executor`` names no installed
                                                    executor (did-you-mean)
``invalid-executor-config``               error     an executor ``config:`` its ``Config`` rejects
``skill-invalid``                         error     a SKILL.md without frontmatter, name or
                                                    description
========================================  ========  ================================================


A schema error does not hide the other findings of its file: the parts that did validate
are still checked (see :mod:`~vally_authoring.lint.valid_parts`), so one run lists every problem.

The modules: :mod:`~vally_authoring.lint.diagnostics` (what a finding is, the result of a
run), :mod:`~vally_authoring.lint.catalogs` (where grader and executor classes come from),
:mod:`~vally_authoring.lint.spec_checks` (the checks of one eval file),
:mod:`~vally_authoring.lint.valid_parts` (the parts of a spec that validate),
:mod:`~vally_authoring.lint.skill_checks` (SKILL.md files) and
:mod:`~vally_authoring.lint.run` (what ``vally lint [PATH]`` selects and checks).
"""
