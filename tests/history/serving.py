"""Running ``vally serve`` in a subprocess for tests: start it on a free port, wait for the
line that says where it serves, stop it with SIGINT."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

URL_LINE = re.compile(r"^Serving (\d+) runs? \((\d+) outcomes\) at (http://\S+)")
LOCAL = "http://127.0.0.1"
"""The base URL of in-process test clients: a Host the app answers to (the test client's
own default, ``testserver``, is refused like any foreign name)."""


class Served:
    """A ``vally serve`` process (a context manager that stops it)."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vally", "serve", *args, "--port", "0"],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
        self.url = ""
        self.runs = self.outcomes = 0
        self.output: list[str] = []
        self.errors = ""
        assert self.process.stdout is not None
        for line in self.process.stdout:  # blocks until the server prints, or exits
            self.output.append(line)
            match = URL_LINE.match(line)
            if match:
                self.runs, self.outcomes = int(match[1]), int(match[2])
                self.url = match[3]
                return
        self.process.wait(timeout=30)

    def stop(self) -> int:
        """SIGINT (Ctrl-C), then the exit code; checks that no traceback was printed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        _out, err = self.process.communicate(timeout=60)
        self.errors = err
        assert "Traceback" not in err, err
        return self.process.returncode

    def __enter__(self) -> Served:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
