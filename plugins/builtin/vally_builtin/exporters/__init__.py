"""Built-in exporters (``vally export --exporter NAME``)."""
