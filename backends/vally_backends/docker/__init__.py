"""The ``docker`` backend: each trial runs in its own container, safe by default.

Importing this package imports neither the docker SDK nor the backend module; the names below
are resolved on first use, so ``vally --help`` and plugin listing stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vally import lazy_attributes

_EXPORTS = {
    "DockerBackend": "vally_backends.docker.backend",
    "DockerSandbox": "vally_backends.docker.sandbox",
    "DockerProcess": "vally_backends.docker.sandbox",
    "Config": "vally_backends.docker.config",
    "DockerUnavailableError": "vally_backends.docker.errors",
    "ImageError": "vally_backends.docker.errors",
    "OutOfMemoryError": "vally_backends.docker.errors",
}

__all__ = [
    "Config",
    "DockerBackend",
    "DockerProcess",
    "DockerSandbox",
    "DockerUnavailableError",
    "ImageError",
    "OutOfMemoryError",
]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from vally_backends.docker.backend import DockerBackend
    from vally_backends.docker.config import Config
    from vally_backends.docker.errors import DockerUnavailableError, ImageError, OutOfMemoryError
    from vally_backends.docker.sandbox import DockerProcess, DockerSandbox
