"""Pure statistics of comparisons: estimates and intervals, exact and Welch tests, power,
multiplicity and judge agreement. No module here reads or writes a file."""
