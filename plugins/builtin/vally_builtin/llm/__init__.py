"""Built-in LLM providers (entry-point group ``vally.llm_providers``)."""
