"""The run engine: plan, schedule, run a trial, grade, score and write run folders.

Everything a run needs between loaded specs and written records. Imports the plugin
system, spec loading, contracts, models and errors; never the tools or the CLI.
"""
