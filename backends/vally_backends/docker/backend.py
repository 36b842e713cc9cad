"""The ``docker`` backend: one container per trial, created with safe defaults.

Defaults: no network (only ``lo``), every capability dropped, ``no-new-privileges``, a pids
limit (256), a memory limit (1g, swap disabled), a non-root user when the image has one, and
only allow-listed host environment variables. Blocking docker SDK calls run in worker
threads. Containers carry labels (:mod:`vally_backends.docker.cleanup`) so that leftovers of
dead runs are swept at the next ``start`` and by ``vally docker prune``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import logging
import os
import shutil
import tarfile
import tempfile
import time
import weakref
from pathlib import Path
from typing import IO, Any, ClassVar

from vally import (
    BackendError,
    BaseBackend,
    CleanupError,
    ConfigError,
    PluginMetadata,
    SetupError,
    TrialContext,
)
from vally_backends.docker.archive import TarBuilder
from vally_backends.docker.cgroups import CgroupLocator
from vally_backends.docker.channel import KEEPER_SCRIPT
from vally_backends.docker.cleanup import (
    LABEL_POOLED,
    LABEL_TRIAL,
    base_labels,
    find_leftovers,
    remove_containers,
    remove_dead_volumes,
)
from vally_backends.docker.config import Config as DockerConfig
from vally_backends.docker.disk import (
    DiskPlan,
    StorageFacts,
    disk_plan,
    quota_possible,
    storage_facts,
)
from vally_backends.docker.errors import DockerUnavailableError, ImageError
from vally_backends.docker.image_files import image_files
from vally_backends.docker.pool import WarmPool
from vally_backends.docker.sandbox import ContainerInfo, DockerSandbox, run_blocking
from vally_backends.local import fresh_folder, run_git

logger = logging.getLogger("vally.backends.docker")

IDLE_COMMAND = ["/bin/sh", "-c", KEEPER_SCRIPT]
"""The container's main process: it waits on its standard input for the sandbox's first
command (see :mod:`vally_backends.docker.channel`); the other commands run beside it with
``docker exec``."""

BUILD_TAG_PREFIX = "vally-build"
"""Repository of images built from ``dockerfile=``; the tag is the build context's hash."""

WORKSPACE_TAG_PREFIX = "vally-workspace"
"""Repository of the images that add the empty workspace folder, owned by the sandbox user,
to the run's image (one layer holding one folder entry); the tag hashes the image id, the
folder and the owner, so a later run with the same image and user reuses it."""

ROOT_WARNING = (
    "commands run as root in the container: the image sets no user and has no user with "
    "uid >= 1000; set user=<name|uid> or add a user to the image"
)


def connect() -> Any:
    """A docker ``APIClient`` from the environment (``DOCKER_HOST`` etc.), pinged.

    Raises:
        DockerUnavailableError: No engine answers.
    """
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise DockerUnavailableError(
            "the docker backend needs the 'docker' Python package",
            hint="pip install docker",
        ) from exc
    try:
        client = docker.from_env(max_pool_size=64)
        client.ping()
    except Exception as exc:
        raise DockerUnavailableError(
            f"no Docker engine is reachable: {exc}",
            hint="start Docker (or set DOCKER_HOST) and check that this user may use it",
        ) from exc
    return client.api


def parse_passwd(text: str) -> list[tuple[str, int, int]]:
    """``(name, uid, gid)`` of every well-formed line of an ``/etc/passwd``."""
    users: list[tuple[str, int, int]] = []
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[2].isdigit() and parts[3].isdigit():
            users.append((parts[0], int(parts[2]), int(parts[3])))
    return users


def parse_group(text: str) -> dict[str, int]:
    """Group name to gid, from an ``/etc/group``."""
    groups: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 3 and parts[2].isdigit():
            groups[parts[0]] = int(parts[2])
    return groups


def resolve_user(
    spec: str, passwd: list[tuple[str, int, int]], groups: dict[str, int], image: str
) -> tuple[int, int]:
    """Turn ``name``, ``uid``, ``name:group`` or ``uid:gid`` into numeric ids using the
    image's own ``/etc/passwd`` and ``/etc/group``.

    Raises:
        ConfigError: A name is not known in the image.
    """
    user, _, group = spec.partition(":")
    uid: int | None = None
    gid: int | None = None
    if user.isdigit():
        uid = int(user)
        gid = next((g for _, u, g in passwd if u == uid), uid)
    else:
        entry = next(((u, g) for name, u, g in passwd if name == user), None)
        if entry is None:
            raise ConfigError(
                f"user {user!r} does not exist in image {image!r} (no entry in /etc/passwd)",
                hint="give a numeric uid (user=1000) or a user the image defines",
            )
        uid, gid = entry
    if group:
        if group.isdigit():
            gid = int(group)
        elif group in groups:
            gid = groups[group]
        else:
            raise ConfigError(
                f"group {group!r} does not exist in image {image!r} (no entry in /etc/group)",
                hint="give a numeric gid (user=1000:1000) or a group the image defines",
            )
    return uid, gid if gid is not None else uid


def context_digest(context: Path, dockerfile: Path) -> str:
    """A hash of everything a build sends: the Dockerfile and the files of the context that
    ``.dockerignore`` keeps (paths, modes, contents)."""
    from docker.utils.build import exclude_paths

    ignore = context / ".dockerignore"
    patterns: list[str] = []
    if ignore.is_file():
        patterns = [
            line.strip()
            for line in ignore.read_text().splitlines()
            if line.strip() and not line.startswith("#")
        ]
    digest = hashlib.sha256()
    digest.update(b"dockerfile\0" + dockerfile.read_bytes())
    for rel in sorted(exclude_paths(str(context), patterns)):
        path = context / rel
        digest.update(rel.encode() + b"\0")
        if path.is_symlink():
            digest.update(b"link\0" + os.readlink(path).encode())
        elif path.is_file():
            digest.update(oct(path.stat().st_mode & 0o777).encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


class DockerBackend(BaseBackend[DockerConfig]):
    """Runs each trial in its own Docker container (see the module docstring for defaults).

    Lifecycle: :meth:`start` connects, sweeps containers of dead runs, resolves (pulls or
    builds) the image and decides the user; :meth:`open` creates one container per trial;
    :meth:`shutdown` removes whatever is still open.
    """

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="docker",
        kind="backend",
        description="Run each trial in its own Docker container (no network, "
        "no capabilities, memory and pids limits by default).",
    )

    def __init__(self, config: DockerConfig | None = None) -> None:
        super().__init__(config)
        self._api: Any = None
        self.run_id = ""
        self.image = ""
        self.container_image = ""
        """What containers are created from: :attr:`image`, or an image adding the empty
        workspace folder to it (see :data:`WORKSPACE_TAG_PREFIX`)."""
        self.uid = 0
        self.gid = 0
        self.warnings: list[str] = []
        self._env: dict[str, str] = {}
        self._sandboxes: weakref.WeakSet[DockerSandbox] = weakref.WeakSet()
        self._pool: WarmPool | None = None
        self._cgroups = CgroupLocator()
        self.storage_quota = False
        """Whether the engine enforces ``disk`` as a storage quota (decided in start)."""
        self.disk = self._disk_plan(StorageFacts("", None))
        """What ``disk`` bounds in the run's containers (decided in start)."""

    @property
    def api(self) -> Any:
        """The docker ``APIClient`` (after :meth:`start`)."""
        if self._api is None:
            raise BackendError("the docker backend was not started; call start(run_id) first")
        return self._api

    # ----------------------------------------------------------------- start

    async def start(self, run_id: str) -> None:
        """Connect, sweep containers of dead runs, make the image available, pick the user.

        Raises:
            DockerUnavailableError: No engine answers.
            ImageError: The image is absent and cannot be pulled, or its build failed.
            ConfigError: An argument names something that does not exist (network, user).
        """
        self.run_id = run_id
        self._api = await run_blocking(connect)
        await self.sweep()
        self.image = await run_blocking(self._ensure_image)
        await run_blocking(self._check_network)
        await run_blocking(self._decide_user)
        facts = await run_blocking(self._storage_facts)
        if self.config.disk is not None and quota_possible(facts):
            self.storage_quota = await run_blocking(self._storage_quota_works)
        self.disk = self._disk_plan(facts)
        disk_warning = self.disk.warning()
        if disk_warning is not None:
            self.warnings.append(disk_warning)
        self.container_image = self.image
        if not self.workspace_volume:
            self.container_image = await run_blocking(self._workspace_image)
        self._env = {name: os.environ[name] for name in self.config.env if name in os.environ}
        if self.config.pool > 0:
            self._pool = WarmPool(self._create_spare, self._remove_spare, self.config.pool)
        for warning in self.warnings:
            logger.warning("docker backend: %s", warning)

    def expect_sandboxes(self, count: int) -> None:
        """The run will open ``count`` sandboxes: the warm pool makes no spare beyond
        them (see :meth:`vally_backends.docker.pool.WarmPool.expect`)."""
        if self._pool is not None:
            self._pool.expect(count)

    def passed_env(self) -> dict[str, str]:
        """The host variables passed into every container (``env``); their values are
        scrubbed from outputs unless public."""
        return {name: os.environ[name] for name in self.config.env if name in os.environ}

    async def sweep(self) -> list[str]:
        """Remove containers (and volumes) left by dead vally runs of this host.

        Returns:
            The ids of the removed containers.
        """

        def _sweep() -> list[str]:
            leftovers = find_leftovers(self.api, dead_only=True)
            problems = remove_containers(self.api, leftovers)
            remove_dead_volumes(self.api)
            for problem in problems:
                logger.warning("docker backend: cannot remove a leftover container: %s", problem)
            return [item.id for item in leftovers]

        removed: list[str] = await run_blocking(_sweep)
        return removed

    def _ensure_image(self) -> str:
        import docker.errors

        if self.config.image is None:
            return self._build()
        ref: str = self.config.image
        present = True
        try:
            self.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            present = False
        except docker.errors.APIError as exc:
            raise ImageError(f"cannot inspect image {ref!r}: {exc}") from exc
        if self.config.pull == "always" or (not present and self.config.pull == "missing"):
            try:
                from docker.utils import parse_repository_tag

                repository, tag = parse_repository_tag(ref)
                errors = [
                    str(line["error"])
                    for line in self.api.pull(
                        repository, tag=tag or "latest", stream=True, decode=True
                    )
                    if isinstance(line, dict) and "error" in line
                ]
                if errors:
                    raise docker.errors.APIError(errors[-1])
                self.api.inspect_image(ref)
                present = True
            except (docker.errors.APIError, docker.errors.ImageNotFound) as exc:
                if present:
                    raise ImageError(
                        f"cannot pull image {ref!r} (pull=always): {exc.explanation or exc}",
                        hint="check the registry is reachable, or use pull=missing",
                    ) from exc
                raise ImageError(
                    f"image {ref!r} is not available locally and could not be pulled: "
                    f"{exc.explanation or exc}",
                    hint="build or load the image locally (docker build / docker load), "
                    "check the name, or make the registry reachable",
                ) from exc
        if not present:
            raise ImageError(
                f"image {ref!r} is not available locally and pull=never forbids pulling it",
                hint="build or load it first, or use pull=missing",
            )
        return ref

    def _build(self) -> str:
        import docker.errors

        context = Path(self.config.context or Path(self.config.dockerfile or ".").parent)
        context = context.resolve()
        dockerfile = Path(self.config.dockerfile) if self.config.dockerfile else None
        dockerfile = (dockerfile or context / "Dockerfile").resolve()
        if not dockerfile.is_file():
            raise ConfigError(
                f"dockerfile={dockerfile} does not exist",
                hint="give the Dockerfile's path (relative to the current folder)",
            )
        if not context.is_dir():
            raise ConfigError(f"context={context} is not a folder")
        tag = f"{BUILD_TAG_PREFIX}:{context_digest(context, dockerfile)[:20]}"
        try:
            self.api.inspect_image(tag)
            return tag  # built before from the same context
        except docker.errors.ImageNotFound:
            pass
        log: list[str] = []
        try:
            for chunk in self.api.build(
                path=str(context),
                dockerfile=str(dockerfile),
                tag=tag,
                rm=True,
                forcerm=True,
                pull=self.config.pull == "always",
                decode=True,
                labels={"vally.build": "1"},
            ):
                if "stream" in chunk:
                    log.append(str(chunk["stream"]))
                if "error" in chunk:
                    tail = "".join(log[-10:]).strip()
                    raise ImageError(
                        f"building {dockerfile} failed: {chunk['error'].strip()}\n{tail}",
                        hint="fix the Dockerfile; base images must be local when no "
                        "registry is reachable",
                    )
        except docker.errors.APIError as exc:
            raise ImageError(f"building {dockerfile} failed: {exc}") from exc
        return tag

    def _check_network(self) -> None:
        import docker.errors

        name = self.config.network
        if name in ("none", "bridge"):
            return
        try:
            self.api.inspect_network(name)
        except docker.errors.NotFound as exc:
            raise ConfigError(
                f"network={name!r} does not exist",
                hint=f"create it with 'docker network create {name}' or use none/bridge",
            ) from exc

    def _image_files(self, paths: list[str]) -> dict[str, str | None]:
        """Read files of the image from a created, never started container.

        Returns, per path, the file's text ("" for a link or other non-regular entry), or
        None when it does not exist.
        """
        import docker.errors

        found: dict[str, str | None] = {}
        created = self.api.create_container(
            self.image, command=["true"], labels=base_labels(self.run_id)
        )
        try:
            for path in paths:
                try:
                    stream, _ = self.api.get_archive(created["Id"], path)
                except docker.errors.NotFound:
                    found[path] = None
                    continue
                found[path] = ""
                with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                    for member in tar:
                        handle = tar.extractfile(member) if member.isfile() else None
                        if handle is not None:
                            found[path] = handle.read().decode("utf-8", "replace")
                        break
        finally:
            with contextlib.suppress(docker.errors.APIError):
                self.api.remove_container(created["Id"], force=True)
        return found

    def _storage_facts(self) -> StorageFacts:
        """The engine's storage driver and backing file system (``docker info``)."""
        try:
            return storage_facts(self.api.info())
        except Exception as exc:
            logger.debug("docker backend: no storage driver facts (%s)", exc)
            return StorageFacts("", None)

    def _disk_plan(self, facts: StorageFacts) -> DiskPlan:
        """What ``disk`` bounds, given :attr:`storage_quota`."""
        config = self.config
        return disk_plan(
            config.disk,
            config.disk_bytes,
            quota=self.storage_quota,
            read_only=config.read_only,
            workdir=config.workdir,
            facts=facts,
        )

    def _storage_quota_works(self) -> bool:
        """Whether the engine accepts a per-container storage quota (``--storage-opt
        size``): only some storage drivers do (e.g. overlay2 on xfs with project quotas)."""
        import docker.errors

        host_config = self.api.create_host_config(storage_opt={"size": self.config.disk})
        try:
            created = self.api.create_container(
                self.image,
                command=["true"],
                labels=base_labels(self.run_id),
                host_config=host_config,
            )
        except docker.errors.APIError as exc:
            logger.debug("docker backend: no storage quota (%s); the workspace is a tmpfs", exc)
            return False
        with contextlib.suppress(docker.errors.APIError):
            self.api.remove_container(created["Id"], force=True)
        return True

    def _decide_user(self) -> None:
        inspected = self.api.inspect_image(self.image)
        image_user = (inspected.get("Config") or {}).get("User") or ""
        files = image_files(
            inspected["Id"], ["/bin/sh", "/etc/passwd", "/etc/group"], self._image_files
        )
        if files["/bin/sh"] is None:
            raise ImageError(
                f"image {self.image!r} has no /bin/sh; the docker backend runs every command "
                "through it (and its main process is a shell)",
                hint="use an image with a shell (e.g. a -slim or alpine variant)",
            )
        passwd = parse_passwd(files["/etc/passwd"] or "")
        groups = parse_group(files["/etc/group"] or "")
        self.warnings = []
        if self.config.user:
            self.uid, self.gid = resolve_user(self.config.user, passwd, groups, self.image)
        elif image_user:
            self.uid, self.gid = resolve_user(image_user, passwd, groups, self.image)
        else:
            regular = [(u, g) for _, u, g in passwd if 1000 <= u < 65534]
            self.uid, self.gid = regular[0] if regular else (0, 0)
        if self.uid == 0:
            self.warnings.append(ROOT_WARNING)

    def _workspace_image(self) -> str:
        """The run's image with the empty workspace folder owned by the sandbox user, made
        once (one archive put into a created container, then committed with the image's
        own configuration) and reused by later runs; the run's image itself when that
        fails (each container then gets the folder put in before its start)."""
        import docker.errors

        workdir = self.config.workdir
        source = self.api.inspect_image(self.image)
        digest = hashlib.sha256(
            f"{source['Id']}\0{workdir}\0{self.uid}:{self.gid}".encode()
        ).hexdigest()
        tag = f"{WORKSPACE_TAG_PREFIX}:{digest[:20]}"
        try:
            self.api.inspect_image(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        labels = base_labels(self.run_id)
        # The commit fills what the given configuration leaves unset from the container's;
        # the run's labels are blanked so that containers of the image carry none but
        # their own.
        conf = dict(source.get("Config") or {})
        conf["Labels"] = {**(conf.get("Labels") or {}), **dict.fromkeys(labels, "")}
        created = None
        try:
            created = self.api.create_container(self.image, command=["true"], labels=labels)
            self.api.put_archive(created["Id"], "/", self._workspace_archive())
            repository, _, name = tag.partition(":")
            self.api.commit(created["Id"], repository=repository, tag=name, conf=conf)
        except docker.errors.APIError as exc:
            logger.debug("docker backend: no workspace image (%s); copying per trial", exc)
            return self.image
        finally:
            if created is not None:
                with contextlib.suppress(docker.errors.APIError):
                    self.api.remove_container(created["Id"], force=True)
        return tag

    def _workspace_archive(self) -> IO[bytes]:
        """A tar holding only the empty workspace folder, owned by the sandbox user."""
        builder = TarBuilder(self.uid, self.gid)
        builder.add_dir(self.config.workdir.lstrip("/"))
        return builder.finish()

    # ----------------------------------------------------------------- open

    async def open(self, trial: TrialContext) -> DockerSandbox:
        """Give the trial a started container with its workspace (and git checkout): a
        spare from the warm pool when one is ready, else a new one.

        Raises:
            SetupError: The container or the workspace could not be created.
        """
        if not self.image:
            raise BackendError("the docker backend was not started; call start(run_id) first")
        env = {**self._env, **{str(k): str(v) for k, v in trial.environment.env.items()}}
        if trial.keep_workspace is not None:
            try:
                await asyncio.to_thread(fresh_folder, Path(trial.keep_workspace))
            except OSError as exc:
                raise SetupError(
                    f"cannot prepare the kept workspace {trial.keep_workspace}: {exc}",
                    hint="check that the --workspace folder is writable",
                ) from exc
        pool = self._pool
        info: ContainerInfo | None = None
        try:
            if pool is not None:
                info = await pool.take()
            if info is None:
                info = await self._create_for(trial)
        except BaseException:
            if pool is not None:
                pool.release()
            raise
        sandbox = DockerSandbox(
            self.api,
            info,
            workdir=self.config.workdir,
            memory=self.config.memory,
            keep_workspace=trial.keep_workspace,
            env=env,
            on_close=self._closed,
            cgroups=self._cgroups,
            fresh=lambda: self._open_fresh(trial, env),
        )
        self._sandboxes.add(sandbox)
        if trial.environment.git is not None:
            try:
                await self._checkout(trial, sandbox)
            except BaseException:
                with contextlib.suppress(Exception):
                    await sandbox.close()
                raise
        return sandbox

    async def _open_fresh(self, trial: TrialContext, env: dict[str, str]) -> DockerSandbox:
        """A sandbox in a new container for ``trial`` beside its own (see
        :meth:`DockerSandbox.open_fresh`): never a pooled spare (one made before may be
        any age), not counted by the pool, removed with the run at the latest. Cancelled
        while the container is being made, it still removes the container.

        Raises:
            SetupError: The container could not be created.
        """
        made = asyncio.ensure_future(self._create_for(trial))
        try:
            info = await asyncio.shield(made)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await run_blocking(self._remove_spare, await made)
            raise
        sandbox = DockerSandbox(
            self.api,
            info,
            workdir=self.config.workdir,
            memory=self.config.memory,
            env=env,
            on_close=self._sandboxes.discard,
            cgroups=self._cgroups,
        )
        self._sandboxes.add(sandbox)
        return sandbox

    def _closed(self, sandbox: DockerSandbox) -> None:
        """Bookkeeping once a sandbox's container is gone: it needs no removal at shutdown,
        and the pool counts one trial fewer open."""
        self._sandboxes.discard(sandbox)
        if self._pool is not None:
            self._pool.release()

    async def _create_for(self, trial: TrialContext) -> ContainerInfo:
        """A new container labelled with the trial (when the pool had none ready)."""
        labels = {**dict(trial.labels), **base_labels(trial.run_id or self.run_id)}
        labels[LABEL_TRIAL] = trial.key.as_id()
        try:
            return await run_blocking(self._create, labels)
        except BackendError:
            raise
        except Exception as exc:
            raise SetupError(
                f"cannot create a container from {self.image!r} for {trial.key.as_id()}: {exc}",
                hint="the image needs /bin/sh; check the backend arguments "
                "('docker info' shows the engine)",
            ) from exc

    def _create_spare(self) -> ContainerInfo:
        """A container for the warm pool: labelled with the run only (its trial is not
        known yet)."""
        return self._create({**base_labels(self.run_id), LABEL_POOLED: "1"})

    def _remove_spare(self, info: ContainerInfo) -> None:
        """Remove a pooled container no trial took (and its workspace volume)."""
        import docker.errors

        with contextlib.suppress(docker.errors.NotFound):
            self.api.remove_container(info.id, force=True, v=True)

    def _host_config(self, labels: dict[str, str]) -> Any:
        """The container's limits, and its workspace mount when it needs one."""
        from docker.types import DriverConfig, LogConfig, Mount, Ulimit

        config = self.config
        mounts: list[Any] = []
        disk = config.disk_bytes
        quota = disk is not None and self.storage_quota
        if self.workspace_volume:
            # The workspace on its own size-limited, memory-backed mount: an anonymous
            # volume made with the container and removed with it (``v=True``).
            size = disk if disk is not None else config.memory_bytes
            options = {
                "type": "tmpfs",
                "device": "tmpfs",
                "o": f"uid={self.uid},gid={self.gid},mode=0755,size={size}",
            }
            mounts.append(
                Mount(
                    target=config.workdir,
                    source=None,
                    type="volume",
                    labels=labels,
                    driver_config=DriverConfig("local", options=options),
                )
            )
        tmpfs = self.disk.tmpfs()
        return self.api.create_host_config(
            # The first command's output travels over the attach stream (see
            # vally_backends.docker.channel); nothing reads the container's log.
            log_config=LogConfig(type=LogConfig.types.NONE),
            network_mode=config.network,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=config.pids,
            mem_limit=config.memory,
            memswap_limit=config.memory,
            nano_cpus=int(config.cpus * 1e9) if config.cpus else None,
            read_only=config.read_only,
            init=config.init,
            mounts=mounts or None,
            tmpfs=tmpfs,
            storage_opt={"size": config.disk} if quota else None,
            ulimits=[Ulimit(name="fsize", soft=disk, hard=disk)] if disk is not None else None,
        )

    @property
    def workspace_volume(self) -> bool:
        """Whether the workspace is a per-container size-limited mount (read-only root, or
        a disk limit the engine cannot enforce as a storage quota)."""
        disk = self.config.disk_bytes
        return self.config.read_only or (disk is not None and not self.storage_quota)

    def _create(self, labels: dict[str, str]) -> ContainerInfo:
        """Create and start one container: two engine calls, nothing copied. The empty
        workspace, owned by the user, is there from the start: a volume, or a folder of
        :attr:`container_image`. Only when that image could not be made is the folder put
        in before the start (a third call, and an archive the engine unpacks)."""
        workdir = self.config.workdir
        user = f"{self.uid}:{self.gid}"
        created = self.api.create_container(
            self.container_image,
            entrypoint=IDLE_COMMAND[:1],
            command=IDLE_COMMAND[1:],
            user=user,
            working_dir=workdir,
            labels=labels,
            host_config=self._host_config(labels),
            hostname="vally-sandbox",
            stdin_open=True,
        )
        container = created["Id"]
        try:
            if not self.workspace_volume and self.container_image == self.image:
                self.api.put_archive(container, "/", self._workspace_archive())
            self.api.start(container)
        except Exception:
            with contextlib.suppress(Exception):
                self.api.remove_container(container, force=True, v=True)
            raise
        return ContainerInfo(
            id=container,
            image=self.image,
            user=user,
            uid=self.uid,
            gid=self.gid,
            started_at=time.time(),
            warnings=list(self.warnings),
            disk=self.disk.metadata(),
            channel=True,
            init=self.config.init,
        )

    async def _checkout(self, trial: TrialContext, sandbox: DockerSandbox) -> None:
        git = trial.environment.git
        assert git is not None
        source = (Path(trial.spec_dir) / git.source).resolve()
        if not source.is_dir():
            raise SetupError(
                f"git.source {source} is not a folder",
                hint="git.source is relative to the eval file and must name a git repository",
            )
        ref = git.ref or "HEAD"
        code, sha, err = await run_git(source, ["rev-parse", "--verify", f"{ref}^{{commit}}"])
        if code != 0:
            raise SetupError(
                f"cannot resolve git ref {ref!r} in {source}: {err.strip()}",
                hint="check that git.source is a git repository and git.ref exists in it",
            )
        folder = Path(tempfile.mkdtemp(prefix="vally-docker-git-"))
        try:
            checkout = folder / "repo"
            steps = [
                (Path.cwd(), ["clone", "--quiet", "--no-checkout", str(source), str(checkout)]),
                (checkout, ["checkout", "--quiet", "--detach", sha.strip()]),
            ]
            for where, args in steps:
                code, _, err = await run_git(where, args)
                if code != 0:
                    raise SetupError(
                        f"cannot check out {ref!r} of {source}: git {args[0]} failed: {err.strip()}"
                    )
            await sandbox.copy_in(checkout, ".")
        finally:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    # ----------------------------------------------------------------- shutdown

    async def shutdown(self) -> None:
        """Remove containers of this run that are still there.

        Raises:
            CleanupError: Some container could not be removed.
        """
        if self._api is None:
            return
        problems: list[str] = []
        if self._pool is not None:
            pool, self._pool = self._pool, None
            problems += await pool.close()
        for sandbox in list(self._sandboxes):
            try:
                await sandbox.close()
            except CleanupError as exc:
                problems.append(exc.message)
        self._sandboxes.clear()

        def _leftovers() -> list[str]:
            items = [
                item
                for item in find_leftovers(self.api, dead_only=False)
                if item.run_id == self.run_id and item.pid == str(os.getpid())
            ]
            problems: list[str] = remove_containers(self.api, items)
            return problems

        try:
            problems += await run_blocking(_leftovers)
        except Exception as exc:
            problems.append(str(exc))
        if problems:
            raise CleanupError(
                "the docker backend could not remove containers of run "
                f"{self.run_id}: " + "; ".join(problems),
                hint="remove them with 'vally docker prune'",
            )
