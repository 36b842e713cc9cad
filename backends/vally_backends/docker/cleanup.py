"""Labels on everything the docker backend creates, and sweeping what dead runs left behind.

Every container (and per-trial volume) carries:

- ``vally.run-id``: the run it belongs to;
- ``vally.trial``: the trial id (``variant/eval/stimulus/model/trial``);
- ``vally.pid``: the process id of the vally process that created it;
- ``vally.host``: the host name of that process;
- ``vally.pooled``: ``1`` on containers made ahead for the warm pool (they carry no
  ``vally.trial``: their trial is not known when they are created).

A run is dead when its ``vally.host`` is this host and no process ``vally.pid`` is alive.
Containers of other hosts are never touched (their liveness cannot be checked from here).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LABEL_RUN = "vally.run-id"
LABEL_TRIAL = "vally.trial"
LABEL_PID = "vally.pid"
LABEL_HOST = "vally.host"
LABEL_POOLED = "vally.pooled"


def host_name() -> str:
    """This machine's name as recorded in ``vally.host``."""
    return socket.gethostname()


def base_labels(run_id: str) -> dict[str, str]:
    """The labels of every resource this process creates for ``run_id``."""
    return {LABEL_RUN: run_id, LABEL_PID: str(os.getpid()), LABEL_HOST: host_name()}


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists on this host (even one we may not signal)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_dead(labels: Mapping[str, str]) -> bool:
    """True when the labels name a vally process of this host that is no longer alive."""
    if labels.get(LABEL_HOST) != host_name():
        return False
    try:
        pid = int(labels.get(LABEL_PID, ""))
    except ValueError:
        return False
    return not pid_alive(pid)


@dataclass(frozen=True)
class Leftover:
    """A container left by a vally run."""

    id: str
    name: str
    run_id: str
    trial: str
    pid: str
    host: str
    status: str


def find_leftovers(api: Any, *, dead_only: bool = True) -> list[Leftover]:
    """vally-labelled containers (all of them, or only those of dead runs of this host)."""
    found: list[Leftover] = []
    for item in api.containers(all=True, filters={"label": LABEL_RUN}):
        labels = item.get("Labels") or {}
        if dead_only and not is_dead(labels):
            continue
        names = item.get("Names") or [""]
        found.append(
            Leftover(
                id=item["Id"],
                name=names[0].lstrip("/"),
                run_id=labels.get(LABEL_RUN, ""),
                trial=labels.get(LABEL_TRIAL, ""),
                pid=labels.get(LABEL_PID, ""),
                host=labels.get(LABEL_HOST, ""),
                status=item.get("Status", ""),
            )
        )
    return found


def remove_containers(api: Any, leftovers: list[Leftover]) -> list[str]:
    """Force-remove containers (and their anonymous volumes); returns error messages."""
    import docker.errors

    problems: list[str] = []
    for item in leftovers:
        try:
            api.remove_container(item.id, force=True, v=True)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as exc:
            if "already in progress" not in str(exc):
                problems.append(f"{item.id[:12]}: {exc}")
    return problems


def remove_dead_volumes(api: Any) -> None:
    """Remove per-trial workspace volumes of dead runs (best effort)."""
    import docker.errors

    with contextlib.suppress(docker.errors.APIError):
        volumes = (api.volumes(filters={"label": LABEL_RUN}) or {}).get("Volumes") or []
        for volume in volumes:
            if is_dead(volume.get("Labels") or {}):
                with contextlib.suppress(docker.errors.APIError):
                    api.remove_volume(volume["Name"], force=True)
