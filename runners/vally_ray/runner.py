"""The Ray runner plugin (see :mod:`vally_ray`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import signal
import threading
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from vally import (
    ConfigError,
    PluginMetadata,
    SetupError,
    SpecArchive,
    StrictConfig,
    TrialDispatch,
    TrialJob,
    TrialOutcome,
    TrialResources,
    VallyError,
    run_trial_job,
)
from vally_ray.permits import ClusterLLMGate

CANCEL_GRACE_SECONDS = 10.0
"""How long an interrupted trial's task gets to close its sandbox; after that (and a
margin) the driver kills the task's worker process, whose agents' keepers then kill
them."""

INTERRUPT_POLL_SECONDS = 0.1
"""How often a task's thread wakes while its trial runs, so a cancellation reaches it."""


class RayRunnerConfig(StrictConfig):
    """``--runner-args`` of the Ray runner.

    Attributes:
        address: The cluster: ``auto`` (the one this machine belongs to), ``HOST:PORT`` of
            the head's GCS, or ``ray://HOST:PORT`` (Ray Client).
        num_cpus: CPUs each trial reserves on its node.
        memory: Bytes of memory each trial reserves (None: none reserved).
        resources: Custom resources each trial needs, as ``NAME:AMOUNT`` (``docker:1`` for
            nodes started with ``--resources '{"docker": 1}'``).
        max_retries: How often Ray runs a trial again when its worker or node dies.
        scheduling: ``SPREAD`` spreads trials over the nodes; ``DEFAULT`` packs them.
        namespace: The Ray namespace of the run's tasks.
        ship_files: Ship the spec's files to the nodes (false: nodes read them at the
            driver's paths, from a shared file system).
        runtime_env: The Ray runtime environment of the run's tasks: a JSON object, or a
            YAML/JSON file holding one (``pip``, ``py_modules``, ``working_dir``,
            ``env_vars``, ...; local paths in a file are relative to it). None: the
            nodes' own Python environment.
    """

    address: str = "auto"
    num_cpus: float = Field(default=1.0, ge=0)
    memory: int | None = Field(default=None, ge=0)
    resources: list[str] = Field(default_factory=list)
    max_retries: int = Field(default=3, ge=0)
    scheduling: Literal["SPREAD", "DEFAULT"] = "SPREAD"
    namespace: str = "vally"
    ship_files: bool = True
    runtime_env: str | None = None


def parse_resources(items: list[str]) -> dict[str, float]:
    """``["docker:1", "gpu_box:0.5"]`` -> ``{"docker": 1.0, "gpu_box": 0.5}``.

    Raises:
        ConfigError: An item is not ``NAME:AMOUNT`` with a non-negative number.
    """
    out: dict[str, float] = {}
    for item in items:
        name, sep, amount = item.partition(":")
        try:
            value = float(amount)
        except ValueError:
            value = -1.0
        if not sep or not name or value < 0:
            raise ConfigError(
                f"--runner-args resources={item}: expected NAME:AMOUNT, e.g. docker:1",
                hint="repeat resources=NAME:AMOUNT for each custom resource a trial needs",
            )
        out[name] = value
    return out


PATH_KEYS = ("working_dir",)
"""Runtime-env keys holding one local path (resolved against the file that names them)."""

PATH_LIST_KEYS = ("py_modules",)
"""Runtime-env keys holding a list of local paths or URIs."""


def load_runtime_env(value: str) -> dict[str, Any]:
    """``--runner-args runtime_env=``: a JSON object, or a YAML/JSON file holding one
    (relative ``working_dir``/``py_modules`` paths in a file resolve against its folder).

    Raises:
        ConfigError: The value is neither, or does not hold a mapping.
    """
    import json

    import yaml

    where = f"--runner-args runtime_env={value}"
    text, base = value, None
    if not value.lstrip().startswith("{"):
        path = Path(value).expanduser()
        try:
            text, base = path.read_text(encoding="utf-8"), path.absolute().parent
        except OSError as exc:
            raise ConfigError(
                f"{where}: cannot read {path}: {exc.strerror or exc}",
                hint="give a JSON object ('{\"pip\": [\"requests\"]}') or a YAML file",
            ) from exc
    try:
        env = json.loads(text) if base is None else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{where}: not valid {'JSON' if base is None else 'YAML'}: {exc}",
            hint="write a mapping such as {py_modules: [./my_plugins]}",
        ) from exc
    if not isinstance(env, dict):
        raise ConfigError(
            f"{where}: a runtime environment is a mapping, got {type(env).__name__}",
            hint="write a mapping such as {py_modules: [./my_plugins]}",
        )
    return env if base is None else _anchored(env, base)


def _anchored(env: dict[str, Any], base: Path) -> dict[str, Any]:
    def local(item: Any) -> Any:
        if isinstance(item, str) and "://" not in item and not Path(item).is_absolute():
            return str(base / item)
        return item

    out = dict(env)
    for key in PATH_KEYS:
        if key in out:
            out[key] = local(out[key])
    for key in PATH_LIST_KEYS:
        if isinstance(out.get(key), list):
            out[key] = [local(item) for item in out[key]]
    return out


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_LOCK = threading.Lock()


def _worker_loop() -> asyncio.AbstractEventLoop:
    """This worker process's event loop, in a thread of its own, shared by its tasks (the
    run's plugins are built once and stay bound to it)."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="vally-trials", daemon=True).start()
            _LOOP = loop
        return _LOOP


def _trial_task(
    job: TrialJob, files: SpecArchive | None, llm_gate: ClusterLLMGate
) -> TrialOutcome:
    """The Ray task: run one attempt on this node, reading the spec's files from ``files``
    (unpacked once per node) and taking LLM permits from ``llm_gate``. A cancellation
    (``ray.cancel`` raises KeyboardInterrupt here) cancels the trial, which closes its
    sandbox before the task ends."""
    import ray

    future: concurrent.futures.Future[TrialOutcome] | None = None
    try:
        node = ray.get_runtime_context().get_node_id()
        future = asyncio.run_coroutine_threadsafe(
            run_trial_job(job, node=node, files=files, llm_gate=llm_gate), _worker_loop()
        )
        while not future.done():
            # In slices: Ray raises the cancellation's KeyboardInterrupt in this thread only
            # between bytecodes, never inside one long blocking wait.
            concurrent.futures.wait([future], timeout=INTERRUPT_POLL_SECONDS)
        return future.result()
    except KeyboardInterrupt:
        if future is not None:
            future.cancel()
            with contextlib.suppress(BaseException):
                future.result(timeout=CANCEL_GRACE_SECONDS)
        raise


class RayRunner:
    """Runs each trial attempt as a Ray task; ``--workers`` caps the tasks in flight
    cluster-wide (the kernel never submits more)."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="ray",
        kind="runner",
        description="Run trials as tasks on a Ray cluster (pip install 'vally[ray]').",
    )
    Config = RayRunnerConfig
    runs_elsewhere: ClassVar[bool] = True

    def __init__(self, config: RayRunnerConfig | None = None) -> None:
        self.config = config or RayRunnerConfig()
        self.resources = parse_resources(self.config.resources)
        self.runtime_env = (
            load_runtime_env(self.config.runtime_env) if self.config.runtime_env else None
        )
        self._task: Any = None
        self._connected = False
        self._files: Any = None
        self._files_shipped = False
        self._files_lock = asyncio.Lock()
        self._llm_gate: ClusterLLMGate | None = None
        self._totals: dict[str, float] = {}
        self._remote: Any = None
        self._tasks: dict[str, Any] = {}

    async def start(self, run_id: str) -> None:
        """Connect to the cluster and check that some node can take a trial.

        Raises:
            SetupError: Ray is not installed, no cluster answers at the address, or no node
                has the resources a trial needs.
        """
        try:
            import ray
        except ImportError as exc:
            raise SetupError(
                "the ray runner needs Ray, which is not installed",
                hint="install it with: pip install 'vally[ray]'",
            ) from exc
        try:
            self._connect(ray)  # in the main thread, where Ray can set its signal handlers
        except Exception as exc:
            with_env = " with the runtime environment" if self.runtime_env else ""
            raise SetupError(
                f"cannot connect to the Ray cluster at {self.config.address!r}{with_env}: "
                f"{type(exc).__name__}: {exc}",
                hint="start one with `ray start --head` (see docs/distributed.md) and pass "
                "its address with --ray-address HOST:PORT",
            ) from exc
        untyped: Any = ray  # cluster_resources() has no annotations
        self._totals = dict(untyped.cluster_resources())
        self._check_capacity(self._totals)
        self._remote = ray.remote(_trial_task)
        self._task = self._remote.options(**self._options(None))
        self._llm_gate = ClusterLLMGate(run_id, self.config.namespace)

    def _connect(self, ray: Any) -> None:
        # Ray sets its own SIGTERM handler in the main thread: keep the run's handlers (an
        # interrupt stops the run and cancels the tasks).
        saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._init(ray)
        finally:
            for sig, handler in saved.items():
                if handler is not None:
                    signal.signal(sig, handler)

    def _init(self, ray: Any) -> None:
        ray.init(
            address=self.config.address,
            namespace=self.config.namespace,
            ignore_reinit_error=True,
            runtime_env=self.runtime_env,
            logging_level="WARNING",
            log_to_driver=False,
            configure_logging=False,
        )
        self._connected = True

    def _options(self, spec: TrialResources | None) -> dict[str, Any]:
        """The task options of a trial: ``--runner-args`` given explicitly win over the
        spec's ``defaults.resources``, which win over the runner's defaults."""
        given = self.config.model_fields_set
        num_cpus, memory = self.config.num_cpus, self.config.memory
        custom: dict[str, float] = {}
        if spec is not None:
            if spec.cpus is not None and "num_cpus" not in given:
                num_cpus = spec.cpus
            if spec.memory is not None and "memory" not in given:
                memory = int(spec.memory)
            custom.update(spec.custom)
        custom.update(self.resources)
        options: dict[str, Any] = {
            "num_cpus": num_cpus,
            "max_retries": self.config.max_retries,
            "retry_exceptions": False,
            "scheduling_strategy": self.config.scheduling,
        }
        if custom:
            options["resources"] = custom
        if memory is not None:
            options["memory"] = memory
        return options

    def _task_for(self, dispatch: TrialDispatch) -> Any:
        """The task with the trial's resources (one per distinct setting).

        Raises:
            SetupError: No node of the cluster has what the trial needs.
        """
        spec: TrialResources | None = dispatch.resources
        if spec is None:
            return self._task
        key = spec.model_dump_json()
        task = self._tasks.get(key)
        if task is None:
            options = self._options(spec)
            wanted = {"CPU": options["num_cpus"], **options.get("resources", {})}
            if "memory" in options:
                wanted["memory"] = options["memory"]
            self._check_capacity(self._totals, wanted, "defaults.resources of the eval")
            task = self._tasks[key] = self._remote.options(**options)
        return task

    def _check_capacity(
        self,
        total: dict[str, float],
        wanted: dict[str, float] | None = None,
        lower: str = "--runner-args num_cpus=/resources=",
    ) -> None:
        if wanted is None:
            wanted = {"CPU": self.config.num_cpus, **self.resources}
        missing = [f"{k}: {v:g}" for k, v in wanted.items() if v > 0 and total.get(k, 0.0) < v]
        if missing:
            have = ", ".join(f"{k}: {v:g}" for k, v in sorted(total.items())) or "nothing"
            raise SetupError(
                f"no node of the Ray cluster can run a trial: it needs {', '.join(missing)}, "
                f"the cluster has {have}",
                hint="start nodes with those resources (ray start --num-cpus/--resources), "
                f"or lower {lower}",
            )

    async def run_trial(self, dispatch: TrialDispatch) -> Any:
        """Submit the attempt, await its outcome and hand it to the kernel; on an interrupt
        cancel the task (its sandbox is closed on the node) and record it as cancelled."""
        import ray
        from ray.exceptions import RayError, TaskCancelledError

        try:
            task = self._task_for(dispatch)
            files = await self._spec_files(dispatch)
        except VallyError as exc:  # no node fits the trial; the spec's files cannot ship
            return dispatch.failed(exc.render())
        ref = task.remote(dispatch.job(), files, self._llm_gate)
        try:
            outcome = await ref
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            ray.cancel(ref)
            settling = asyncio.ensure_future(_settle(ref))
            done, _ = await asyncio.wait([settling], timeout=CANCEL_GRACE_SECONDS + 5)
            if not done:
                # The task did not stop in time: kill its worker process (the keeper of
                # every agent it started gets SIGHUP when it dies and kills the agent).
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            return dispatch.cancelled()
        except TaskCancelledError:
            return dispatch.cancelled()
        except RayError as exc:
            return dispatch.failed(f"the trial's Ray task failed: {type(exc).__name__}: {exc}")
        return await dispatch.accept(outcome)

    async def _spec_files(self, dispatch: TrialDispatch) -> Any:
        """The run's spec files in the object store (put once; every task gets the one
        reference, which Ray fetches once per node)."""
        if not self.config.ship_files:
            return None
        async with self._files_lock:
            if not self._files_shipped:
                import ray

                archive = await asyncio.to_thread(dispatch.spec_archive)
                self._files = ray.put(archive)
                self._files_shipped = True
            return self._files

    async def shutdown(self) -> None:
        """Remove the run's LLM permits and disconnect from the cluster (the cluster keeps
        running)."""
        if self._connected:
            import ray

            if self._llm_gate is not None:
                await asyncio.to_thread(self._llm_gate.remove)
            await asyncio.to_thread(ray.shutdown)
            self._connected = False


async def _settle(ref: Any) -> None:
    with contextlib.suppress(Exception):
        await ref
