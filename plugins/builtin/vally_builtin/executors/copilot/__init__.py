"""The ``copilot`` executor: the GitHub Copilot CLI agent, driven through its official Python
SDK (``github-copilot-sdk``, the ``copilot`` extra).

Example (``eval.yaml``)::

    defaults:
      model: gpt-4.1
      executor:
        name: copilot
        config:
          permissions: [shell, write, read, mcp]

One CLI process and one session per trial, in the trial's workspace (inside the container
for the ``docker`` backend); the turns of a stimulus are turns of that session. Every
session event is kept in ``copilot-events.jsonl`` in the trial's folder and mapped to
trajectory events (:mod:`.events`). Tool permissions are approved only as the config allows
(:mod:`.permissions`). See ``docs/copilot.md``.
"""

from .config import CopilotConfig
from .executor import CopilotExecutor, CopilotSdkExecutor

__all__ = ["CopilotConfig", "CopilotExecutor", "CopilotSdkExecutor"]
