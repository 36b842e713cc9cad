"""The commands that help people write evals and plugins: ``vally lint``, ``vally schema``,
``vally new``, ``vally init`` and ``vally export``.

A package outside the kernel, like any third-party one: it imports only the public ``vally``
API, and each of its commands is a ``vally.cli`` entry point (:mod:`~vally_authoring.cli`).
Modules, one concept each:

* :mod:`~vally_authoring.lint`: static checks of eval specs and SKILL.md files, each finding
  located at its line (``vally lint``);
* :mod:`~vally_authoring.schema`: the JSON Schema of eval.yaml, experiment files, .vally.yaml
  and promotion rules, with the config of every plugin the project can load
  (``vally schema``);
* :mod:`~vally_authoring.scaffold`: a plugin package generated from the example plugin of its
  kind (``vally new``); the wheel ships the examples in ``plugin_examples/``;
* :mod:`~vally_authoring.project_init`: a new eval project that runs offline
  (``vally init``);
* :mod:`~vally_authoring.export`: an eval spec written in another tool's format through an
  exporter plugin (``vally export``);
* :mod:`~vally_authoring.cli`: the five commands, one module each.
"""
