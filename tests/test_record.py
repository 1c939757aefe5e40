"""The record type (issue #49): kanx.record.Record is the one place that builds or parses
record.json, and what it writes is what kanx wrote before it (a record's bytes, and so the
checksum in its done marker, must not change)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from helpers import ROOT

from kanx.record import Record, read_state, write_record

SOURCES = [p for d in ("kanx", "hydra_plugins", "scripts") for p in sorted((ROOT / d).rglob("*.py"))]
# Another change of issue #49 moves this script's rollout settling into kanx.analyze.settle; it
# still parses record.json itself until then.
NOT_YET: set[str] = set()


# Every JSON file or text kanx parses, by where it is parsed: record.json only in Record.parse.
# A new json.loads belongs here with what it reads, and never reads a record.
PARSED = {
    "kanx/record.py:Record.parse": "record.json",
    "kanx/sealing.py:integrity_problem": "the done marker",
    "kanx/sealing.py:reseal_record": "the done marker",
    "kanx/sealing.py:compress_curves": "the done marker",
    "kanx/records.py:main": "the done marker",
    "kanx/history.py:vouch_for_rewritten_curve": "the done marker",
    "kanx/loggers/base.py:LoggerConfig.nodes":
        "its own canonical JSON of the loggers' config nodes (hashable for pack_key)",
    "kanx/locks.py:lock_is_live": "a lock",
    "kanx/locks.py:try_lock": "a lock",
    "kanx/locks.py:unlock": "a lock",
    "kanx/manifest.py:read_manifest": "manifest.json",
    "kanx/manifest.py:_manifest_to_extend": "manifest.json",
    "kanx/plan.py:main": "a worker's plan file",
    "kanx/identity.py:run_defining": "a config, round-tripped through JSON",
    "kanx/analyze/aggregate.py:architecture_edges": "a width written as JSON",
    "kanx/analyze/__main__.py:read_drawn": "the curve figures' signatures (figures/curves/drawn.json)",
    "scripts/studies/verdict_spread.py:main": "its cache, and a child process's output",
    "scripts/studies/reading_spread.py:under_capability": "a child process's output",
    "scripts/studies/reading_spread.py:main": "its raw measurements (--raw)",
    "scripts/benchmarks/bench_threads.py:run_setting": "a child process's output",
}


def _json_loads(tree: ast.AST, scope: str = ""):
    """The qualified name of the function around every json.load or json.loads call."""
    for node in ast.iter_child_nodes(tree):
        inner = f"{scope}.{node.name}".lstrip(".") if isinstance(node, ast.FunctionDef | ast.ClassDef) else scope
        f = getattr(node, "func", None)
        if (isinstance(node, ast.Call) and isinstance(f, ast.Attribute) and f.attr in ("load", "loads")
                and isinstance(f.value, ast.Name) and f.value.id == "json"):
            yield scope
        yield from _json_loads(node, inner)


def json_parsers() -> set[str]:
    """'path:function' for every function of kanx, hydra_plugins and scripts that parses JSON."""
    return {f"{p.relative_to(ROOT)}:{scope}" for p in SOURCES for scope in _json_loads(ast.parse(p.read_text()))}


def test_only_the_record_type_parses_record_json():
    assert {p for p in json_parsers() if p.split(":")[0] not in NOT_YET} == set(PARSED)


def test_a_record_is_written_as_before(tmp_path):
    """The bytes kanx wrote before the type: json.dumps of the fields in order, indent 1, NaN as null."""
    fields = {"schema_version": 3, "status": "ok", "metrics": {"test_rmse": float("nan"), "train_rmse": 0.5},
              "timing": {"wall_s": 1.0}, "config": {"beta": 0.1}, "error": None}
    write_record(tmp_path, fields)
    nan_as_null = {**fields, "metrics": {"test_rmse": None, "train_rmse": 0.5}}
    expected = json.dumps(nan_as_null, indent=1, sort_keys=False).encode()
    assert (tmp_path / "record.json").read_bytes() == expected
    state = read_state(tmp_path)
    assert (state.status, state.problem, state.record) == ("done", None, json.loads(expected))
    assert Record.read(tmp_path).to_bytes() == expected  # read and written back: the same bytes


def test_a_trained_record_keeps_the_key_order_of_the_old_dict():
    base = Record.new(dataset="d", family="f", condition="E", beta=0.1, seed=0, data_seed=1, status="ok", n_train=2,
                      n_test=3, timing={"wall_s": 1.0, "pack_size": 1}, versions={}, git_commit=None, config_hash="h",
                      data_hash="x", config={})
    rec = base.trained({"test_rmse": 1.0}, None, "K", "cpu", segments=[{"epochs": [0, 1]}])
    assert list(rec.fields) == ["schema_version", "dataset", "family", "condition", "beta", "seed", "data_seed",
                                "status", "n_train", "n_test", "metrics", "timing", "versions", "git_commit",
                                "config_hash", "data_hash", "config", "error", "status_reason", "target_unit"]
    assert list(rec.fields["timing"]) == ["wall_s", "pack_size", "device", "segments"]
    assert base.fields["metrics"] == {} and "device" not in base.fields["timing"]  # the base is not changed
    assert list(base.failed("tb").fields) == list(base.fields) and base.failed("tb").fields["error"] == "tb"


def test_a_record_that_is_not_a_json_object_is_not_one(tmp_path):
    (tmp_path / "record.json").write_text("[1, 2]")
    try:
        Record.read(Path(tmp_path))
    except ValueError as e:
        assert "record.json holds a JSON list, not an object" in str(e)
    else:
        raise AssertionError("a JSON list was read as a record")
