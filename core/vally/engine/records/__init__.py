"""Records and run folders: the layout of a run folder, the records written into it, and the
verdicts, scores and tallies computed from them. The bottom layer of the engine."""
