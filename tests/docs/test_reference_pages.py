"""The built-ins and record-format reference pages cover what the code declares."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from pydantic.alias_generators import to_camel

from vally.models.records import RunSummaryRecord, TrialResultRecord
from vally.models.trajectory import TrajectoryEvent
from vally.plugins.groups import ENTRY_POINT_GROUPS

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"


@pytest.fixture(scope="module")
def gen_docs() -> ModuleType:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_docs as module
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


def _declared_builtins() -> list[tuple[str, str, str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    declared = project["project"]["entry-points"]
    return [
        (kind, name, target)
        for kind, group in ENTRY_POINT_GROUPS.items()
        for name, target in declared.get(group, {}).items()
    ]


def _sections(text: str, level: str) -> dict[str, str]:
    """Heading text -> body, for headings of one level (``##`` or ``###``)."""
    parts = re.split(rf"^{level} (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def _json_name(model: type, name: str) -> str:
    field = model.model_fields[name]  # type: ignore[attr-defined]
    return field.alias or to_camel(name)


def test_every_builtin_entry_point_is_documented_under_its_kind() -> None:
    page = (REFERENCE / "builtins.md").read_text()
    kinds = _sections(page, "##")
    declared = _declared_builtins()
    assert len(declared) >= 30
    titles = {
        "grader": "Graders",
        "executor": "Executors",
        "backend": "Backends",
        "reporter": "Reporters",
        "eval_provider": "Eval providers",
        "shard_strategy": "Shard strategies",
        "llm_provider": "LLM providers",
        "exporter": "Exporters",
        "runner": "Runners",
    }
    for kind, name, target in declared:
        body = kinds[titles[kind]]
        plugins = _sections(body, "###")
        assert f"`{name}`" in plugins, f"{kind} {name} missing from builtins.md"
        assert f"Class: `{target}`." in plugins[f"`{name}`"]


def test_builtin_options_all_have_a_description() -> None:
    page = (REFERENCE / "builtins.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert rows
    undocumented = [row for row in rows if row.rstrip().endswith("|  |")]
    assert not undocumented, "options without a description:\n" + "\n".join(undocumented)
    # the grader taxonomy and a nested config model are rendered
    assert "| `static` | `free` | `t1-universal` |" in page
    assert "**ToolMatcher**" in page
    assert "| `max` | duration | required |" in page


def test_builtins_are_sorted_by_kind_then_name(gen_docs: ModuleType) -> None:
    entries = gen_docs.builtin_entry_points()
    assert {(k, n) for k, n, _ in entries} == {(k, n) for k, n, _ in _declared_builtins()}
    order = {kind: i for i, kind in enumerate(gen_docs.KIND_ORDER)}
    keys = [(order[k], n) for k, n, _ in entries]
    assert keys == sorted(keys)


def test_every_trial_record_field_appears_by_its_json_name() -> None:
    page = (REFERENCE / "records.md").read_text()
    table = _sections(page, "###")["TrialResultRecord"]
    for name in TrialResultRecord.model_fields:
        key = _json_name(TrialResultRecord, name)
        assert f"| `{key}` |" in table, f"{key} missing from records.md"
    summary = _sections(page, "###")["RunSummaryRecord"]
    for name in RunSummaryRecord.model_fields:
        assert f"| `{_json_name(RunSummaryRecord, name)}` |" in summary


def test_every_event_type_has_a_section_with_its_data_fields() -> None:
    page = (REFERENCE / "records.md").read_text()
    sections = _sections(page, "###")
    union = TrajectoryEvent.__origin__.__args__  # type: ignore[attr-defined]
    assert len(union) >= 10
    for cls in union:
        kind = cls.model_fields["type"].default
        data = cls.model_fields["data"].annotation
        body = sections[kind]
        for name in data.model_fields:
            assert f"| `{_json_name(data, name)}` |" in body, f"{kind}.{name}"
    assert '"type": "session"' in page


def test_example_lines_are_valid_and_carry_every_field() -> None:
    page = (REFERENCE / "records.md").read_text()
    blocks = re.findall(r"```json\n(.*?)\n```", page, flags=re.DOTALL)
    lines = [json.loads(line) for block in blocks for line in block.splitlines()]
    trial = next(line for line in lines if line.get("type") == "trial-result")
    summary = next(line for line in lines if line.get("type") == "run-summary")
    assert set(trial) == {_json_name(TrialResultRecord, n) for n in TrialResultRecord.model_fields}
    assert set(summary) == {
        _json_name(RunSummaryRecord, n) for n in RunSummaryRecord.model_fields
    }
    record = TrialResultRecord.model_validate(trial)
    assert record.trajectory is not None
    assert {e.type for e in record.trajectory.events} == {
        cls.model_fields["type"].default
        for cls in TrajectoryEvent.__origin__.__args__  # type: ignore[attr-defined]
    }
    assert RunSummaryRecord.model_validate(summary).verdict == "pass"


def test_example_stream_parses_with_the_vally_stream_adapter() -> None:
    from vally_builtin.executors.streams import parse_vally_stream

    page = (REFERENCE / "records.md").read_text()
    stream = page.split("Example stream:", 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0]
    result = parse_vally_stream(stream, turn=2)
    assert result.session_id == "session-1"
    assert [e.type for e in result.events] == [
        "tool_call",
        "tool_result",
        "token_usage",
        "assistant_message",
    ]
    assert all(e.turn == 2 for e in result.events)
    assert result.output == "Created hello.txt."


def test_attribute_sections_are_parsed_with_continuation_lines(gen_docs: ModuleType) -> None:
    class Documented:
        """Summary.

        Attributes:
            first: One line.
            second (int): Starts here
                and continues here.

        Notes after.
        """

    assert gen_docs.attribute_docs(Documented) == {
        "first": "One line.",
        "second": "Starts here and continues here.",
    }
