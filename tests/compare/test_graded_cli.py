"""End to end, with no model anywhere: two ``vally eval`` runs of a deterministic agent
through the ``command`` executor, compared by ``vally compare`` from their graded records,
decided by promotion rules, and the same through an experiment's ``promotion:`` section."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

AGENT = """
import json, sys
version = sys.argv[1]
prompt = sys.stdin.read().strip()
entry = json.load(open("answers.json"))[version].get(prompt, {"output": "I do not know."})
if entry.get("crash"):
    print("boom", file=sys.stderr)
    sys.exit(3)
usage = {"inputTokens": 10, "outputTokens": entry.get("tokens", 20)}
print(json.dumps({"type": "token_usage", "data": usage}))
print(json.dumps({"type": "assistant_message", "data": {"content": entry["output"]}}))
"""

RIGHT_POLITE = {"output": "See the Billing page. Thanks!"}
RIGHT = {"output": "See the Billing page."}
WRONG = {"output": "I am not sure."}
CRASH = {"output": "-", "crash": True}
ANSWERS = {
    # case-1 unchanged, case-2 improves, case-3 and case-4 regress, case-5 stops crashing,
    # case-6 starts crashing, case-7 trades politeness for nothing (regresses on polite),
    # case-8 trades one grader against the other (no outcome)
    "baseline": {
        "q1": RIGHT_POLITE,
        "q2": WRONG,
        "q3": RIGHT,
        "q4": RIGHT,
        "q5": CRASH,
        "q6": RIGHT,
        "q7": RIGHT_POLITE,
        "q8": {"output": "Thanks!"},
    },
    "candidate": {
        "q1": RIGHT_POLITE,
        "q2": RIGHT,
        "q3": WRONG,
        "q4": WRONG,
        "q5": RIGHT,
        "q6": CRASH,
        "q7": RIGHT,
        "q8": RIGHT,
    },
}


def _eval_yaml(prompts: dict[str, str]) -> str:
    stimuli = "".join(
        f"  - name: {name}\n    prompt: {prompt}\n" for name, prompt in prompts.items()
    )
    return (
        "name: support\n"
        "environment:\n  files:\n"
        "    - { src: agent.py, dest: agent.py }\n"
        "    - { src: answers.json, dest: answers.json }\n"
        "defaults:\n  runs: 2\n  timeout: 30s\n"
        "  executor:\n    name: command\n    config:\n"
        '      command: [python3, agent.py, "${VERSION}"]\n      events: vally\n'
        "graders:\n"
        "  - { type: output-contains, name: names-the-page, config: { substring: Billing } }\n"
        "  - { type: output-contains, name: polite, config: { substring: Thanks } }\n"
        f"stimuli:\n{stimuli}"
    )


PROMPTS = {f"case-{i}": f"q{i}" for i in range(1, 9)}


def vally(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVAL_JUDGE", "OPENAI"))}
    return subprocess.run(
        [sys.executable, "-m", "vally", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run(cwd: Path, spec: str, version: str, out: str) -> Path:
    proc = vally("eval", "-e", spec, "-p", f"VERSION={version}", "--output-dir", out, cwd=cwd)
    assert proc.returncode in (0, 1), proc.stderr
    (run_dir,) = (cwd / out).iterdir()
    return run_dir


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deciding")
    (root / "agent.py").write_text(AGENT)
    (root / "answers.json").write_text(json.dumps(ANSWERS))
    (root / "eval.yaml").write_text(_eval_yaml(PROMPTS))
    changed = {**PROMPTS, "case-3": "q3 (reworded)"}
    (root / "changed.yaml").write_text(_eval_yaml(changed))
    _run(root, "eval.yaml", "baseline", "base")
    _run(root, "eval.yaml", "candidate", "cand")
    _run(root, "changed.yaml", "candidate", "changed")
    return root


def _dir(root: Path, name: str) -> str:
    (run_dir,) = (root / name).iterdir()
    return str(run_dir)


def compare(root: Path, *args: str, treatment: str = "cand") -> subprocess.CompletedProcess[str]:
    return vally(
        "compare",
        "--baseline",
        _dir(root, "base"),
        "--treatment",
        _dir(root, treatment),
        *args,
        cwd=root,
    )


def test_compare_without_a_judge_prints_the_graders_and_names_the_flips(project: Path) -> None:
    proc = compare(project)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ")}
    # names-the-page: 5 of the 7 cases each run scored (case-5, then case-6 crashed); over
    # the 6 paired cases two gains and two losses cancel (case-8 trades it for politeness)
    assert rows["names-the-page"][2:5] == ["0.714", "0.714", "+0.000"]
    assert rows["polite"][2:5] == ["0.429", "0.143", "-0.333"]
    assert "regressed case-6: started erroring (2 of 2)" in " ".join(out.split())
    assert "case-8" not in " ".join(out.split()).split("Cases:")[1].split("Flips")[0]
    assert "improved case-5: errors went away (2 of 2)" in " ".join(out.split())
    assert "pass→fail 1 (case-7)" in out
    assert "Failed cases (an errored trial): baseline 1, candidate 1" in out
    assert "No judged comparison" in out


def test_a_failing_rule_set_exits_1_and_says_which_rule_and_why(
    project: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - type: no-regressed-cases\n    name: never worse on the page\n"
        "    graders: [names-the-page]\n"
        "  - type: no-more-failed\n"
    )
    junit = tmp_path / "rules.xml"
    output = tmp_path / "comparison.jsonl"
    proc = compare(project, "--rules", str(rules), "--junit", str(junit), "--output", str(output))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    failing = next(line for line in lines if "never worse on the page" in line)
    assert failing.split()[0] == "FAIL"
    assert "support/case-3, support/case-4, support/case-6" in failing
    assert any(line.split()[:2] == ["PASS", "no-more-failed:"] for line in lines)
    assert "Verdict: HOLD (1 of 2 rules did not pass: never worse on the page)" in proc.stdout
    xml = junit.read_text()
    assert xml.count("<testcase") == 2 and xml.count("<failure") == 1
    (record,) = [json.loads(line) for line in output.read_text().splitlines()]
    assert record["type"] == "graded-comparison"
    assert record["confidenceLevel"] == 0.95
    assert record["promotion"]["verdict"] == "hold"
    assert record["promotion"]["rules"][0]["cases"] == [
        "support/case-3",
        "support/case-4",
        "support/case-6",
    ]
    assert set(record["regressed"]) == {
        "support/case-3",
        "support/case-4",
        "support/case-6",
        "support/case-7",
    }
    assert record["improved"] == ["support/case-2", "support/case-5"]
    assert record["flips"] == [
        {"id": "support/case-7", "from": "pass", "to": "fail", "flip": "pass→fail"}
    ]


def test_a_passing_rule_set_exits_0(project: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - type: no-more-failed\n  - type: no-missing\n  - type: same-suite\n"
        "  - type: non-inferior\n    figure: tokens\n    margin: 10%\n    basis: estimate\n"
    )
    proc = compare(project, "--rules", str(rules))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Verdict: PROMOTE (all 4 rules pass)" in proc.stdout


def test_confidence_level_is_used_and_recorded(project: Path, tmp_path: Path) -> None:
    output = tmp_path / "c.jsonl"
    proc = compare(project, "--confidence-level", "0.9", "--output", str(output))
    assert proc.returncode == 0, proc.stderr
    assert "90% intervals over cases" in proc.stdout
    record = json.loads(output.read_text().splitlines()[0])
    assert record["confidenceLevel"] == 0.9
    assert record["graders"][0]["interval"]["level"] == 0.9
    bad = compare(project, "--confidence-level", "1")
    assert bad.returncode == 1
    assert "--confidence-level must lie strictly between 0 and 1" in bad.stderr


def test_runs_of_different_suites_are_refused_unless_allowed(project: Path) -> None:
    proc = compare(project, treatment="changed")
    assert proc.returncode == 1
    assert "error[VALLY_SUITE_MISMATCH]" in proc.stderr
    assert "support/case-3" in proc.stderr and "--allow-different-suites" in proc.stderr
    assert proc.stdout == ""
    allowed = compare(project, "--allow-different-suites", treatment="changed")
    assert allowed.returncode == 0, allowed.stderr
    assert "1 cases differ in content between the runs: support/case-3" in allowed.stdout


def test_a_bad_rules_file_says_where(project: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - type: improves\n    figure: polite\n    by: -0.1\n")
    proc = compare(project, "--rules", str(rules))
    assert proc.returncode == 1
    assert f"{rules}:4:" in proc.stderr and "margin" in proc.stderr
    rules.write_text("rules:\n  - type: improves\n    figure: nonesuch\n")
    proc = compare(project, "--rules", str(rules))
    assert proc.returncode == 1
    assert "promotion rule 1 (improves) names 'nonesuch'" in proc.stderr


def test_an_experiment_promotion_section_decides_the_variant(project: Path) -> None:
    (project / "experiment.yaml").write_text(
        "name: decide\nevals: [eval.yaml]\nbaseline: current\nvary: [/defaults/executor]\n"
        "variants:\n"
        "  current:\n    overrides: {executor: {name: command, config: "
        "{command: [python3, agent.py, baseline], events: vally}}}\n"
        "  proposed:\n    overrides: {executor: {name: command, config: "
        "{command: [python3, agent.py, candidate], events: vally}}}\n"
        "promotion:\n  rules:\n"
        "    - {type: no-regressed-cases, graders: [names-the-page], eval: support}\n"
        "    - {type: no-more-failed}\n"
    )
    proc = vally(
        "experiment",
        "run",
        "experiment.yaml",
        "-p",
        "VERSION=x",
        "--output-dir",
        "exp",
        cwd=project,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Verdict: HOLD (1 of 2 rules did not pass" in proc.stdout
    (run_dir,) = (project / "exp").iterdir()
    (record,) = [json.loads(x) for x in (run_dir / "comparison.jsonl").read_text().splitlines()]
    assert record["candidate"]["label"] == "proposed"
    assert record["promotion"]["rules"][0]["verdict"] == "fail"
    assert "## Promotion" in (run_dir / "report.md").read_text()
    assert (run_dir / "promotion.xml").read_text().count("<testcase") == 2
