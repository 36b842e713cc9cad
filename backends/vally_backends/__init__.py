"""vally's backends: where trials run (``local``, ``docker``).

Importing this package registers nothing and imports no SDK.
"""
