"""Shards: splitting a run's trials across machines (shard selection, the plan snapshot and
each shard's manifest). Sealing and merging shards are the package ``vally_experiment``'s."""
