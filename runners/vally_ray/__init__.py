"""The ``ray`` runner: every trial of a run as a task on a Ray cluster.

``vally eval ... --runner ray --ray-address HOST:PORT`` connects to the cluster; each trial
attempt (its executor, its sandbox on that node's backend, its grading) runs on a trial host
(a long-lived Ray actor running several trials at once, :mod:`vally_ray.hosts`) on some
node, and its record and files come back to this process, which writes the run folder
and reports exactly as a local run does, as trials finish. The spec's files travel with the
run; the nodes need vally (``pip install 'vally[ray]'``) and the plugins, installed in the
environment their ``ray start`` runs with or shipped with ``--runner-args
runtime_env=FILE`` (see docs/distributed.md).
"""

from vally_ray.runner import RayRunner

__all__ = ["RayRunner"]
