"""Workspace preparation: what happens in a fresh sandbox before the agent starts.

The backend creates the (empty or git worktree) workspace; :func:`prepare_workspace` then
copies ``environment.files``, stages the skills and runs the setup ``commands``, all through
the sandbox so it works the same on every backend.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from vally.contracts.protocols import Sandbox, SkillRef
from vally.errors import PathEscapeError, SetupError, VallyError
from vally.models.spec import EnvironmentConfig, FileEntry
from vally.specs.skills import read_skill

STDERR_TAIL_CHARS = 2000
"""How much of a failing setup command's stderr the error message quotes."""


def confined_dest(dest: str, *, what: str = "dest") -> str:
    """Check that ``dest`` is a relative path that stays inside the workspace.

    Returns the normalised POSIX form. Raises :class:`PathEscapeError` for absolute paths and
    paths climbing out with ``..``.
    """
    pure = PurePosixPath(dest.replace("\\", "/"))
    if pure.is_absolute():
        raise PathEscapeError(
            f"{what} {dest!r} is absolute; it must be relative to the workspace",
            hint="write the destination relative to the workspace, e.g. 'input/data.txt'",
        )
    depth = 0
    for part in pure.parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                raise PathEscapeError(
                    f"{what} {dest!r} leaves the workspace",
                    hint="remove the '..' parts so the destination stays in the workspace",
                )
        elif part != ".":
            depth += 1
    return pure.as_posix()


def _dest_for(entry: FileEntry) -> str:
    if entry.dest is not None and entry.dest.strip():
        return confined_dest(entry.dest, what="files[].dest")
    return Path(entry.src).name


def _tail(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


async def stage_files(sandbox: Sandbox, environment: EnvironmentConfig) -> None:
    """Copy every ``environment.files`` entry into the workspace.

    ``src`` must already be an absolute host path; ``dest`` (default: the source's name) is
    relative to the workspace.

    Raises:
        PathEscapeError: A destination leaves the workspace.
        SetupError: A source is missing or cannot be copied.
    """
    for entry in environment.files:
        src = Path(entry.src)
        dest = _dest_for(entry)
        if not src.exists():
            raise SetupError(
                f"files: source {entry.src} does not exist",
                hint="files[].src is relative to the eval file; check the path",
            )
        try:
            await sandbox.copy_in(src, dest)
        except VallyError:
            raise
        except OSError as exc:
            raise SetupError(f"files: cannot copy {entry.src} to {dest!r}: {exc}") from exc


async def stage_skills(
    sandbox: Sandbox, environment: EnvironmentConfig, *, skills_root: str = ".vally/skills"
) -> list[SkillRef]:
    """Copy each skill folder of ``environment.skills`` to ``<skills_root>/<name>/``.

    Raises:
        SetupError: A skill folder has no valid ``SKILL.md`` or cannot be copied.
    """
    root = confined_dest(skills_root, what="skills root")
    refs: list[SkillRef] = []
    seen: set[str] = set()
    for skill in environment.skills:
        try:
            info = read_skill(Path(skill))
        except VallyError as exc:
            raise SetupError(f"skill {skill}: {exc.message}", hint=exc.hint) from exc
        name = info.name
        if "/" in name or "\\" in name or name in {".", ".."}:
            raise SetupError(
                f"skill {skill}: name {name!r} cannot be used as a folder name",
                hint="a skill name must not contain '/' or '\\'",
            )
        if name in seen:
            continue
        seen.add(name)
        dest = f"{root}/{name}"
        try:
            await sandbox.copy_in(info.path, dest)
        except OSError as exc:
            raise SetupError(f"skill {name}: cannot copy {info.path}: {exc}") from exc
        sandbox_path = PurePosixPath(sandbox.workdir, dest).as_posix()
        refs.append(SkillRef(name, info.description, info.path, sandbox_path))
    return refs


async def run_setup_commands(
    sandbox: Sandbox, environment: EnvironmentConfig, *, setup_timeout: float
) -> None:
    """Run ``environment.commands`` in order with ``sh -c`` in the workspace.

    Raises:
        SetupError: A command exits non-zero or exceeds ``setup_timeout`` seconds; the
            message names the command, its exit code and the end of its stderr.
    """
    for command in environment.commands:
        result = await sandbox.exec(
            ["sh", "-c", command], env=environment.env or None, timeout=setup_timeout
        )
        if result.timed_out:
            raise SetupError(
                f"setup command {command!r} did not finish within {setup_timeout:g}s "
                f"and was killed; stderr: {_tail(result.stderr) or '(empty)'}",
                hint="make the command faster or raise the trial timeout",
            )
        if result.exit_code != 0:
            raise SetupError(
                f"setup command {command!r} failed with exit code {result.exit_code}; "
                f"stderr: {_tail(result.stderr) or '(empty)'}",
                hint="run the command by hand in a copy of the workspace to debug it",
            )


async def prepare_workspace(
    sandbox: Sandbox,
    environment: EnvironmentConfig,
    *,
    skills_root: str = ".vally/skills",
    setup_timeout: float,
) -> list[SkillRef]:
    """Stage files, then skills, then run setup commands; return the staged skills.

    Args:
        sandbox: The trial's freshly opened sandbox.
        environment: The resolved environment (absolute ``files[].src`` and ``skills``).
        skills_root: Workspace folder that receives one sub-folder per skill.
        setup_timeout: Seconds each setup command may take.

    Raises:
        PathEscapeError: A file destination leaves the workspace.
        SetupError: A file, a skill or a setup command failed.
    """
    await stage_files(sandbox, environment)
    refs = await stage_skills(sandbox, environment, skills_root=skills_root)
    await run_setup_commands(sandbox, environment, setup_timeout=setup_timeout)
    return refs
