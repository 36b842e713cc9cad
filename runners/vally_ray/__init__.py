"""The ``ray`` runner: every trial of a run as a task on a Ray cluster.

``vally eval ... --runner ray --ray-address HOST:PORT`` connects to the cluster; each trial
attempt (its executor, its sandbox on that node's backend, its grading) runs as a Ray task on
some node, and its record and files come back to this process, which writes the run folder
and reports exactly as a local run does, as trials finish. Install with
``pip install 'vally[ray]'``; every node needs vally and the project's plugins installed in
the Python environment its ``ray start`` runs with.
"""

from vally_ray.runner import RayRunner

__all__ = ["RayRunner"]
