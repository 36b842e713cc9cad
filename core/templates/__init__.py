"""Templates used by ``vally new`` to scaffold plugin packages."""
