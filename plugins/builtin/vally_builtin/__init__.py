"""vally's built-in plugins: graders, executors, reporters, providers, shard strategies.

Importing this package registers nothing; the kernel finds each class through its entry point.
"""
