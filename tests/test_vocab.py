"""kanx.vocab owns the shared names: every other place that lists them must agree with it."""

from pathlib import Path

import yaml

from kanx import vocab

CONF = Path(__file__).resolve().parents[1] / "conf"


def test_condition_files_are_the_factorial():
    files = {p.stem: yaml.safe_load(p.read_text()) for p in (CONF / "condition").glob("*.yaml")}
    assert set(files) == {vocab.condition_option(c) for c in vocab.CONDITIONS}
    for option, node in files.items():
        name = node["name"]
        assert vocab.condition_option(name) == option
        flags = "E" * node["edge_gates"] + "F" * node["forward"] + "X" * node["exits"]
        assert (flags or vocab.BASELINE) == name


def test_dataset_files_and_the_data_registry_are_the_vocabulary():
    from kanx.data import DATASETS as registered

    assert {p.stem for p in (CONF / "dataset").glob("*.yaml")} == set(vocab.DATASETS)
    assert tuple(registered) == vocab.DATASETS
    assert {vocab.family_of(d) for d in vocab.DATASETS} == set(vocab.FAMILIES)


def test_one_owner_for_condition_and_record_names():
    from kanx import records
    from kanx.analyze import records as analysis_records
    from kanx.analyze import registry
    from kanx.kan.spec import Condition

    assert Condition.NAMES is vocab.CONDITIONS and registry.CONDITIONS is vocab.CONDITIONS
    assert records.SCHEMA_VERSION == analysis_records.SCHEMA_VERSION == vocab.SCHEMA_VERSION
    assert analysis_records.RECORD_NAME == records.RECORD == vocab.RECORD
