"""Errors of the ``docker`` backend. All derive from the public :mod:`vally.errors`."""

from __future__ import annotations

from vally import BackendError, ExecResult, ExecutionError


class DockerUnavailableError(BackendError):
    """No Docker engine answers (daemon stopped, socket missing, no permission)."""

    code = "VALLY_DOCKER_UNAVAILABLE"


class ImageError(BackendError):
    """The image is absent and could not be pulled, or could not be built or inspected."""

    code = "VALLY_DOCKER_IMAGE"


class OutOfMemoryError(ExecutionError):
    """A command in a trial's container was killed by the kernel's out-of-memory killer.

    It is raised by :meth:`DockerSandbox.exec`, so it becomes the error of that trial only
    (the container and the other trials go on). ``result`` is what the command produced
    before it was killed.
    """

    code = "VALLY_DOCKER_OOM"

    def __init__(self, message: str, *, result: ExecResult, hint: str | None = None) -> None:
        self.result = result
        super().__init__(message, hint=hint)
