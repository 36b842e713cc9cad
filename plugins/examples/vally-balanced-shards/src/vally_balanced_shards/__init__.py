"""An example third-party vally shard strategy: shards of about equal expected duration.

Each planned trial gets an expected duration, looked up in this order:

1. the mean ``durationMs`` of matching trials in a previous run's ``results.jsonl``
   (matched on variant, eval, stimulus and model; then on eval and stimulus alone);
2. the stimulus's ``duration`` tag (``30s``, ``2m``) from the eval files given in ``specs``
   or, failing that, recorded in the previous results;
3. ``default_duration``.

Trials are then placed greedily, longest first, on the shard with the least total so far
(the longest-processing-time rule; ties go to the lower shard, then to plan order). The
result is deterministic and a partition: every key lands on exactly one shard.

``--shard-strategy`` builds strategies with their default config, so the defaults read the
environment: ``VALLY_BALANCED_RESULTS`` (path of a ``results.jsonl``),
``VALLY_BALANCED_SPECS`` (eval files, separated by the OS path separator) and
``VALLY_BALANCED_DEFAULT`` (a duration).
"""

from __future__ import annotations

import heapq
import json
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import yaml
from pydantic import Field

from vally import ConfigError, PluginMetadata, StrictConfig, TrialKey, parse_duration

__all__ = ["BalancedShardStrategy", "BalancedShardsConfig", "assign", "expected_durations"]


def _env_list(name: str) -> list[str]:
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p]


class BalancedShardsConfig(StrictConfig):
    """Options of the ``balanced`` shard strategy.

    Attributes:
        results: A previous run's ``results.jsonl`` (default: ``$VALLY_BALANCED_RESULTS``).
        specs: Eval files whose stimuli's ``duration`` tags are read
            (default: ``$VALLY_BALANCED_SPECS``).
        default_duration: The expected duration of a trial nothing else tells about
            (default: ``$VALLY_BALANCED_DEFAULT``, else ``1m``).
    """

    results: str | None = Field(default_factory=lambda: os.environ.get("VALLY_BALANCED_RESULTS"))
    specs: list[str] = Field(default_factory=lambda: _env_list("VALLY_BALANCED_SPECS"))
    default_duration: str = Field(
        default_factory=lambda: os.environ.get("VALLY_BALANCED_DEFAULT", "1m")
    )


def _seconds(value: str, where: str) -> float:
    try:
        return float(parse_duration(value))
    except Exception as exc:
        raise ConfigError(f"{where}: invalid duration {value!r}: {exc}") from exc


Measured = dict[tuple[str, ...], list[float]]
Tagged = dict[tuple[str, str], float]


def _read_results(path: Path) -> tuple[Measured, Tagged]:
    measured: dict[tuple[str, ...], list[float]] = defaultdict(list)
    tagged: dict[tuple[str, str], float] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(
            f"balanced shards: cannot read results {path}: {exc}",
            hint="point VALLY_BALANCED_RESULTS at the results.jsonl of a previous run",
        ) from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: not valid JSON: {exc.msg}") from exc
        if record.get("type") != "trial-result" or record.get("status") != "success":
            continue
        eval_name, stimulus = record.get("evalName"), record.get("stimulusName")
        seconds = float(record.get("durationMs", 0)) / 1000
        variant, model = record.get("variant") or "", record.get("model") or ""
        measured[(variant, eval_name, stimulus, model)].append(seconds)
        measured[(eval_name, stimulus)].append(seconds)
        tag = (record.get("tags") or {}).get("duration")
        if tag:
            tagged[(eval_name, stimulus)] = _seconds(str(tag), f"{path}:{number}")
    return measured, tagged


def _read_spec_tags(paths: Sequence[str]) -> dict[tuple[str, str], float]:
    tagged: dict[tuple[str, str], float] = {}
    for name in paths:
        path = Path(name)
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"balanced shards: cannot read eval file {path}: {exc}") from exc
        eval_name = str(document.get("name") or path.stem)
        base = (document.get("tags") or {}).get("duration")
        for stimulus in document.get("stimuli") or []:
            value = (stimulus.get("tags") or {}).get("duration", base)
            if value:
                tagged[(eval_name, str(stimulus.get("name")))] = _seconds(
                    str(value), f"{path}: stimulus {stimulus.get('name')!r}"
                )
    return tagged


def expected_durations(
    keys: Sequence[TrialKey], config: BalancedShardsConfig
) -> dict[TrialKey, float]:
    """Each key's expected duration in seconds (see the module docstring for the order)."""
    measured: Mapping[tuple[str, ...], list[float]] = {}
    tagged: dict[tuple[str, str], float] = {}
    if config.results:
        measured, tagged = _read_results(Path(config.results))
    tagged = {**tagged, **_read_spec_tags(config.specs)}
    default = _seconds(config.default_duration, "default_duration")
    out: dict[TrialKey, float] = {}
    for key in keys:
        exact = measured.get((key.variant, key.eval_name, key.stimulus, key.model))
        if not exact:
            exact = measured.get(("", key.eval_name, key.stimulus, key.model))
        loose = measured.get((key.eval_name, key.stimulus))
        samples = exact or loose
        if samples:
            out[key] = sum(samples) / len(samples)
        else:
            out[key] = tagged.get((key.eval_name, key.stimulus), default)
    return out


def assign(durations: Sequence[float], total: int) -> list[int]:
    """The 0-based shard of each job under the longest-processing-time rule.

    Jobs are taken longest first (ties: earlier job first) and each goes to the shard with
    the smallest load (ties: lower shard).
    """
    order = sorted(range(len(durations)), key=lambda i: (-durations[i], i))
    loads = [(0.0, shard) for shard in range(total)]
    heapq.heapify(loads)
    shard_of = [0] * len(durations)
    for job in order:
        load, shard = heapq.heappop(loads)
        shard_of[job] = shard
        heapq.heappush(loads, (load + durations[job], shard))
    return shard_of


class BalancedShardStrategy:
    """Splits the plan into shards of about equal expected duration (greedy LPT)."""

    metadata: ClassVar[PluginMetadata] = PluginMetadata(
        name="balanced",
        kind="shard_strategy",
        description="Balance shards by expected trial duration (previous results or tags).",
    )
    Config: ClassVar[type[BalancedShardsConfig]] = BalancedShardsConfig

    def __init__(self, config: BalancedShardsConfig | None = None) -> None:
        self.config = config if config is not None else BalancedShardsConfig()

    def loads(self, keys: Sequence[TrialKey], total: int) -> list[float]:
        """The expected total duration of each shard (index 0 is shard 1)."""
        durations = expected_durations(keys, self.config)
        values = [durations[k] for k in keys]
        out = [0.0] * total
        for job, shard in enumerate(assign(values, total)):
            out[shard] += values[job]
        return out

    def select(self, keys: Sequence[TrialKey], index: int, total: int) -> list[TrialKey]:
        """Return the keys of shard ``index`` (1-based) of ``total``, in plan order.

        Raises:
            ConfigError: ``index``/``total`` are out of range, or an input file is invalid.
        """
        if total < 1 or not 1 <= index <= total:
            raise ConfigError(f"shard {index}/{total} is out of range; use i/n with 1 <= i <= n")
        durations = expected_durations(keys, self.config)
        shard_of = assign([durations[k] for k in keys], total)
        return [key for key, shard in zip(keys, shard_of, strict=True) if shard == index - 1]


