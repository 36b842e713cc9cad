"""Built-in runners: where a run's trials execute."""
