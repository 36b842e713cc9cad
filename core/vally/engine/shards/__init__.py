"""Shards and merge: splitting a run's trials across machines, sealing each finished shard,
and merging the shards' folders back into one run."""
