"""The LLM judge: the ``prompt`` grader and the pairwise judge used by ``vally compare``."""
