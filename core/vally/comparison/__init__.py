"""Comparing runs: graded runs case by case with no model, promotion rules over the
comparison, and the LLM-judged pairwise comparison on top."""
