"""Built-in eval providers."""
