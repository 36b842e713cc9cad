"""One step of a benchmark in a fresh interpreter, so that its peak resident memory
(``VmHWM``, Linux) is its own: not ``ru_maxrss``, which Linux carries over from the forking
parent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def measure_fresh(
    module: str, function: str, folder: Path, before: str | None = None
) -> tuple[float, float]:
    """Call ``<module>.<function>(folder)`` (a module of ``bench/``) in a fresh interpreter;
    its wall seconds and peak resident MB. ``<module>.<before>(folder)``, when given, is
    called first, outside the time (e.g. imports, paid once per process whatever the size).

    Raises:
        SystemExit: The step failed (with its standard error).
    """
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]);"
        f"import {module} as m; from pathlib import Path;"
        + (f"m.{before}(Path(sys.argv[2]));" if before else "")
        + f"start = time.perf_counter(); m.{function}(Path(sys.argv[2]));"
        "took = time.perf_counter() - start;"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0];"
        "print(took, int(hwm.split()[1]) / 1024)"
    )
    here = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", code, here, str(folder)], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"{module}.{function} failed:\n{done.stderr}")
    seconds, peak = done.stdout.split()[-2:]
    return float(seconds), float(peak)
