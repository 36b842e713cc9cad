"""The ``docker`` backend's arguments (``--backend-args k=v`` or ``defaults.backend.args``)."""

from __future__ import annotations

import posixpath
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from vally import StrictConfig

_MEMORY = re.compile(r"^\d+(\.\d+)?[bkmg]?$", re.IGNORECASE)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Config(StrictConfig):
    """Options of the ``docker`` backend.

    Every value may be given as a string (as ``--backend-args`` does); repeated keys become
    lists. Defaults are the safe ones: no network, a memory and a pids limit.

    Attributes:
        image: The image every trial's container runs. Required unless ``dockerfile`` or
            ``context`` is given.
        dockerfile: A Dockerfile to build once per run (in ``start``). Relative paths are
            taken from the current folder. The image is tagged by the hash of the build
            context, so an unchanged context is not built twice.
        context: The build context folder (default: the Dockerfile's folder).
        pull: ``never`` (use only local images), ``missing`` (pull when absent, the default)
            or ``always``.
        network: ``none`` (the default: only a loopback interface), ``bridge``, or the name
            of an existing Docker network.
        cpus: CPU quota in cores (e.g. ``1.5``); unlimited when unset.
        memory: Memory limit (e.g. ``512m``, ``2g``); swap is disabled so the limit holds.
        pids: Maximum number of processes in the container (stops fork bombs).
        user: The user commands run as (name or ``uid[:gid]``). Default: the image's user,
            else the first user with uid >= 1000 in the image's ``/etc/passwd``, else root.
        read_only: Make the container's root file system read-only; the workspace,
            ``/tmp`` and ``/var/tmp`` then live on per-trial writable mounts.
        env: Names of host environment variables passed into the container. Nothing else
            from the host environment enters it.
        workdir: The workspace folder inside the container.
        init: Run a minimal init as process 1, so orphaned processes are reaped.
        disk: Most a trial may write (e.g. ``4g``; ``none`` for no limit). Enforced by the
            engine's storage quota (``--storage-opt size``) where its storage driver
            supports one: it then bounds the container's whole writable layer. Elsewhere
            the workspace, ``/tmp`` and ``/var/tmp`` are size-limited in-memory mounts (which
            also count against ``memory``) and the rest is bounded per file only, which
            the run's output and every record warn about (``read_only`` closes the gap).
            No single file anywhere in the container may grow past it either
            (``RLIMIT_FSIZE``).
        pool: Most spare containers kept created and started ahead of the trials that
            will take them (never more than the most trials open at once, so never more
            than the run's workers); each serves exactly one trial and is removed with it.
            ``0`` turns the warm pool off.
    """

    image: str | None = None
    dockerfile: str | None = None
    context: str | None = None
    pull: Literal["never", "missing", "always"] = "missing"
    network: str = "none"
    cpus: float | None = Field(default=None, gt=0)
    memory: str = "1g"
    pids: int = Field(default=256, ge=8)
    user: str | None = None
    read_only: bool = False
    env: list[str] = Field(default_factory=list)
    workdir: str = "/workspace"
    init: bool = True
    disk: str | None = "4g"
    pool: int = Field(default=4, ge=0, le=64)

    @field_validator("env", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [value]
        return value

    @field_validator("env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _ENV_NAME.match(name):
                raise ValueError(
                    f"env={name!r} is not a variable name; give only the NAME of a host "
                    "variable to pass through (e.g. env=OPENAI_API_KEY)"
                )
        return value

    @field_validator("memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        if not _MEMORY.match(value.strip()):
            raise ValueError(f"memory={value!r} is not a size; use e.g. 512m or 2g")
        return value.strip().lower()

    @field_validator("disk", mode="before")
    @classmethod
    def _disk(cls, value: Any) -> Any:
        if value is None or str(value).strip().lower() in ("none", "off", "0", ""):
            return None
        text = str(value).strip().lower()
        if not _MEMORY.match(text):
            raise ValueError(f"disk={value!r} is not a size; use e.g. 512m or 4g, or none")
        return text

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, value: str) -> str:
        normal = posixpath.normpath(value)
        if not value.startswith("/") or normal == "/":
            raise ValueError(f"workdir={value!r} must be an absolute folder other than '/'")
        return normal

    @field_validator("network")
    @classmethod
    def _network(cls, value: str) -> str:
        if value.strip() in ("host",) or value.startswith("container:"):
            raise ValueError(
                f"network={value!r} would share a namespace with the host or another "
                "container; use none, bridge or a user-defined network"
            )
        return value.strip()

    @model_validator(mode="after")
    def _image_source(self) -> Config:
        building = self.dockerfile is not None or self.context is not None
        if self.image is None and not building:
            raise ValueError(
                "the docker backend needs image=<ref> or dockerfile=<path> "
                "(e.g. --backend-args image=python:3.12-slim)"
            )
        if self.image is not None and building:
            raise ValueError("give either image= or dockerfile=/context=, not both")
        return self

    @property
    def memory_bytes(self) -> int:
        """The memory limit in bytes."""
        return size_bytes(self.memory)

    @property
    def disk_bytes(self) -> int | None:
        """The workspace size limit in bytes (None: unlimited)."""
        return None if self.disk is None else size_bytes(self.disk)


def size_bytes(text: str) -> int:
    """``512m`` -> bytes (``b``, ``k``, ``m``, ``g`` suffixes; none means bytes)."""
    units = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
    factor = units.get(text[-1], 1)
    number = text[:-1] if text[-1] in units else text
    return int(float(number) * factor)
