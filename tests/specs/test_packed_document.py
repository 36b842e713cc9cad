"""A run holds each eval's document packed: the same mapping, its long lists pickled an item
at a time, read back as fresh copies; hashed a stimulus at a time to the same hash."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.traced import traced_held, traced_peak
from vally import LoadedEval
from vally.engine.planning.identity import eval_hash
from vally.models.spec import EvalSpec
from vally.specs.packed import PACKED_BLOCK, PACKED_ITEMS, PackedDocument, packed_eval


def _stimuli(count: int) -> list[dict[str, Any]]:
    return [
        {
            "name": f"s{i}",
            "prompt": f"täsk {i} ✔",
            "graders": [{"type": "output-contains", "config": {"substring": "task", "n": i}}],
            "tags": {"when": datetime.date(2026, 1, 1 + i % 28), "ratio": i / 7},
        }
        for i in range(count)
    ]


def _document(count: int, **extra: Any) -> dict[str, Any]:
    return {"name": "ev", "stimuli": _stimuli(count), "graders": [], **extra}


def _loaded(document: dict[str, Any]) -> LoadedEval:
    spec = EvalSpec.model_validate({"name": "ev", "stimuli": [{"name": "s", "prompt": "p"}]})
    return LoadedEval(spec=spec, source=Path("eval.yaml"), raw=document)


def test_a_packed_document_reads_as_the_document_it_was_made_from() -> None:
    document = _document(PACKED_ITEMS + 5, defaults={"runs": 2})
    packed = PackedDocument(document)
    assert packed == document and document == packed
    assert dict(packed) == document and list(packed) == list(document)
    assert packed["defaults"] is document["defaults"]  # short values are held as they are
    first = packed["stimuli"]
    assert first == document["stimuli"] and first is not document["stimuli"]
    first[0]["name"] = "changed"
    assert packed["stimuli"][0]["name"] == "s0"  # each read is a fresh copy
    assert list(packed.items_of("stimuli")) == document["stimuli"]
    assert packed.is_list("stimuli") and packed.is_list("graders")
    assert not packed.is_list("name")
    with pytest.raises(TypeError):
        packed.items_of("name")


def test_a_list_of_several_blocks_reads_back_whole_and_item_by_item() -> None:
    document = _document(PACKED_BLOCK * 2 + 3)
    packed = PackedDocument(document)
    assert packed["stimuli"] == document["stimuli"]
    assert list(packed.items_of("stimuli")) == document["stimuli"]
    assert [s["name"] for s in packed.items_of("stimuli")][PACKED_BLOCK - 1 : PACKED_BLOCK + 1] == [
        f"s{PACKED_BLOCK - 1}",
        f"s{PACKED_BLOCK}",
    ]


def test_a_packed_document_holds_a_stimulus_in_a_few_dozen_bytes() -> None:
    count = 5_000
    document = _document(count)
    packed, held = traced_held(lambda: PackedDocument(document))
    # pickled one at a time, each of these stimuli took about 200 bytes
    assert held / count < 60
    assert packed["stimuli"] == document["stimuli"]


def test_documents_packed_together_share_the_lists_they_share() -> None:
    stimuli = _stimuli(PACKED_ITEMS)
    shared: dict[int, Any] = {}
    one = PackedDocument({"stimuli": stimuli, "name": "a"}, shared)
    two = PackedDocument({"stimuli": stimuli, "name": "b"}, shared)
    assert one._values["stimuli"] is two._values["stimuli"]
    assert one["stimuli"] == two["stimuli"] == stimuli


def test_what_cannot_be_pickled_is_held_as_it_is() -> None:
    items = [lambda: None for _ in range(PACKED_ITEMS)]
    packed = PackedDocument({"stimuli": items})
    assert packed["stimuli"] is items


@pytest.mark.parametrize(
    "document",
    [
        _document(0),
        _document(3),
        _document(PACKED_ITEMS),
        _document(PACKED_ITEMS * 3, config={"runs": 3}),  # the older spelling, renamed
        _document(PACKED_ITEMS, config={"runs": 3}, defaults={"runs": 1}),  # both: kept
        _document(PACKED_ITEMS, agent_environment={"type": "local"}, tags={"ä": "✔"}),
    ],
    ids=["empty", "short", "packed", "config", "both-spellings", "environment"],
)
def test_a_packed_document_hashes_as_the_document_does(document: dict[str, Any]) -> None:
    plain = eval_hash(_loaded(document))
    assert eval_hash(packed_eval(_loaded(document))) == plain
    changed = {**document, "stimuli": [*document["stimuli"], {"name": "more"}]}
    assert eval_hash(packed_eval(_loaded(changed))) != plain


def test_a_packed_document_is_hashed_without_unpacking_it_whole() -> None:
    document = _document(5_000)
    packed = packed_eval(_loaded(document))
    # hashed whole, the document is made JSON data and text at once: a few times its size
    whole = _loaded(document)
    assert traced_peak(lambda: eval_hash(packed)) * 20 < traced_peak(lambda: eval_hash(whole))


def test_a_run_holds_the_documents_it_loads_packed(tmp_path: Path) -> None:
    from vally.engine.trials.components import load_evals
    from vally.plugins.session import Session
    from vally.specs.loading import find_project, load_eval_file

    lines = "\n".join(f"  - {{name: s{i}, prompt: 'task {i}'}}" for i in range(PACKED_ITEMS))
    path = tmp_path / "eval.yaml"
    path.write_text(f"name: ev\nstimuli:\n{lines}\n", encoding="utf-8")
    project, _ = find_project(tmp_path)
    session = Session(project, tmp_path)
    [loaded] = load_evals(session, project, [path], {}, provider_spec=None, base=tmp_path)
    assert isinstance(loaded.raw, PackedDocument)
    alone = load_eval_file(path)
    assert loaded.raw == alone.raw and loaded.spec == alone.spec
    assert eval_hash(loaded) == eval_hash(alone)
