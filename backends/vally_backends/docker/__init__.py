"""The ``docker`` backend: each trial runs in its own container, safe by default.

Importing this package imports neither the docker SDK nor the backend module; the names the
``if TYPE_CHECKING:`` block below imports are resolved on first use, so ``vally --help`` and
plugin listing stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vally import lazy_attributes

__getattr__, __dir__ = lazy_attributes(__name__)


if TYPE_CHECKING:  # pragma: no cover
    from vally_backends.docker.backend import DockerBackend as DockerBackend
    from vally_backends.docker.config import Config as Config
    from vally_backends.docker.errors import (
        DockerUnavailableError as DockerUnavailableError,
        ImageError as ImageError,
        OutOfMemoryError as OutOfMemoryError,
    )
    from vally_backends.docker.sandbox import (
        DockerProcess as DockerProcess,
        DockerSandbox as DockerSandbox,
    )
