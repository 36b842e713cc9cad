"""The authoring commands, one module each; every module's ``register(app)`` is a ``vally.cli``
entry point. Heavy libraries are imported inside the commands, so ``vally --help`` stays
fast."""
