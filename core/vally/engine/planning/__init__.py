"""Planning a run: which trials of which evals, variants and models run where, what each
one measured, the spec files they need, and which finished trials a resumed run keeps."""
