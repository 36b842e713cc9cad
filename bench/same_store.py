"""Compare two history stores row for row: the check that a faster ``vally ingest`` stores
what the previous code stored.

Usage (from the repository root, with the ``serve`` extra installed)::

    python3 bench/same_store.py OLD.db NEW.db
    python3 bench/same_store.py OLD.db postgresql://postgres@127.0.0.1:55432/vally_test

Every table is read in primary key order in the canonical form of
``tests/history/storedump.py`` (compressed bytes decompressed, each outcome's record line
read back from its block, the time of the ingest left out) and compared row for row. It
prints each table's rows and whether they are the same (the first differing row of each
table that is not), and exits 1 when any table differs.
"""

from __future__ import annotations

import argparse
import sys
from itertools import zip_longest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.history.storedump import table_rows, tables  # noqa: E402
from vally_serve.store import open_store  # noqa: E402

SHOWN = 300
"""Characters of a differing row shown."""


def main() -> None:
    """Compare the stores named on the command line; exit 1 when they differ."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", help="a SQLite file or a postgresql:// URL")
    parser.add_argument("second", help="a SQLite file or a postgresql:// URL")
    args = parser.parse_args()
    first, second = open_store(args.first, create=False), open_store(args.second, create=False)
    same = True
    try:
        with first.read() as a, second.read() as b:
            for table in tables():
                rows = 0
                for number, (left, right) in enumerate(
                    zip_longest(table_rows(a, table), table_rows(b, table)), 1
                ):
                    if left != right:
                        same = False
                        print(f"{table.name}: row {number} differs")
                        print(f"  first:  {str(left)[:SHOWN]}")
                        print(f"  second: {str(right)[:SHOWN]}")
                        break
                    rows = number
                else:
                    print(f"{table.name}: {rows:,} rows, the same")
    finally:
        first.close()
        second.close()
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
