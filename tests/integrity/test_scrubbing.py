"""What vally writes holds no value of a variable passed into the sandbox unless the spec
marks it public, in plain text, in base64, or as a file name (issue 17, case 13)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from tests.integrity.conftest import agent_script, vally, write_eval

DATABASE_URL = "postgres://app:hunter2@db.internal:5432/prod"
HOST_TOKEN = "tok-4f9c2e7a1b6d8830"
LABEL = "release-2026-11"


def _all_output(run_dir: Path) -> tuple[str, list[str]]:
    texts, names = [], []
    for path in run_dir.rglob("*"):
        names.append(path.name)
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(texts), names


def test_passed_variables_are_scrubbed_everywhere_unless_public(project: Path) -> None:
    agent = agent_script(
        project,
        """
        echo "db=$DATABASE_URL"
        echo "host=$DEPLOY_HOST_VALUE"
        echo "label=$RELEASE_LABEL"
        printf '%s' "$DEPLOY_HOST_VALUE" | base64
        printf '%s' "$SERVICE_API_KEY" | base64
        mkdir -p out && echo x > "out/$DEPLOY_HOST_VALUE.txt"
        """,
    )
    write_eval(
        project,
        f"""
        name: scrub
        environment:
          env: {{DATABASE_URL: "{DATABASE_URL}", RELEASE_LABEL: "{LABEL}"}}
          public_env: [RELEASE_LABEL]
        defaults:
          executor: {{name: command, config: {{command: [sh, "{agent}"]}}}}
        stimuli:
          - name: leak
            prompt: go
            artifacts: [out/]
            graders: [{{type: file-exists, config: {{path: "out/*.txt"}}}}]
        """,
    )
    out = project / "out"
    env = {"DEPLOY_HOST_VALUE": HOST_TOKEN, "SERVICE_API_KEY": "sk-9d8c7b6a5f4e3d2c"}
    done = vally(
        "eval", "-e", "evals/eval.yaml", "--output-dir", out,
        "--backend", "local",
        "--backend-args", "env_passthrough=PATH",
        "--backend-args", "env_passthrough=DEPLOY_HOST_VALUE",
        "--backend-args", "env_passthrough=SERVICE_API_KEY",
        cwd=project, env={**os.environ, **env},
    )  # fmt: skip
    assert done.code == 0, done.stderr
    text, names = _all_output(done.run_dir(out))
    assert "db=[REDACTED]" in text and "host=[REDACTED]" in text
    for secret in (DATABASE_URL, HOST_TOKEN, env["SERVICE_API_KEY"]):
        assert secret not in text
        assert base64.b64encode(secret.encode()).decode() not in text
    assert f"label={LABEL}" in text  # marked public
    assert not any(HOST_TOKEN in name for name in names)
    assert "[REDACTED].txt" in names
    assert HOST_TOKEN not in done.stdout + done.stderr
