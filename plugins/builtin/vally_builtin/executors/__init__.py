"""Built-in executors (entry-point group ``vally.executors``).

* ``command`` (:mod:`.command`): runs any agent CLI as a subprocess in the sandbox and reads
  its output, optionally as a JSONL event stream (:mod:`.streams`: ``vally``,
  ``claude-code``, ``codex``).
* ``chat-agent`` (:mod:`.chat_agent`): a built-in tool-using agent over an LLM provider.
* ``mock`` (:mod:`.mock`): a scripted agent for testing graders and pipelines.
"""
