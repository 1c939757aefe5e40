"""kanx.vocab owns the shared names: every other place that lists them must agree with it."""

import yaml

from kanx import vocab
from kanx.confdir import conf_dir

CONF = conf_dir()


def test_condition_files_are_the_factorial():
    files = {p.stem: yaml.safe_load(p.read_text()) for p in (CONF / "condition").glob("*.yaml")}
    assert set(files) == {vocab.condition_option(c) for c in vocab.CONDITIONS}
    for option, node in files.items():
        name = node["name"]
        assert vocab.condition_option(name) == option
        flags = "E" * node["edge_gates"] + "F" * node["forward"] + "X" * node["exits"]
        assert (flags or vocab.BASELINE) == name


def test_a_dataset_is_its_yaml_file_and_its_registry_entry():
    from kanx.data import DATASETS as registered

    # The two places a dataset is written (README, "Adding a dataset") name the same datasets.
    assert {p.stem for p in (CONF / "dataset").glob("*.yaml")} == set(registered)
    # vocab.DATASETS (the report order) names registered datasets; one added without it sorts last.
    assert set(vocab.DATASETS) <= set(registered)
    assert {vocab.family_of(d) for d in vocab.DATASETS} == set(vocab.FAMILIES)


def test_the_analysis_needs_nothing_for_a_dataset_outside_the_report_order():
    from kanx.analyze import labels

    new = "exp_xy"  # README's example: only a YAML file and a registry entry
    assert labels.family_of(new) == new and labels.group_label(new) == new and labels.family_label(new) == new
    assert all(labels.dataset_rank(new) > labels.dataset_rank(d) for d in vocab.DATASETS)
    assert all(labels.family_rank(new) > labels.family_rank(f) for f in vocab.FAMILIES)


def test_one_owner_for_condition_and_record_names():
    from kanx import records
    from kanx.analyze import collect, labels
    from kanx.kan.spec import Condition

    assert Condition.NAMES is vocab.CONDITIONS and labels.CONDITIONS is vocab.CONDITIONS
    assert records.SCHEMA_VERSION == collect.SCHEMA_VERSION == vocab.SCHEMA_VERSION
    assert collect.RECORD_NAME == records.RECORD == vocab.RECORD


def test_a_written_record_has_exactly_the_fields_the_reader_knows(tmp_path):
    """The writer (kanx.runner) and the reader (kanx.analyze.collect) share vocab.RECORD_*:
    a real record of a static and of a dynamical dataset holds exactly those fields."""
    import json

    from helpers import TOY, train_run

    for dataset, errors in (("sin_xy2", vocab.RECORD_ERRORS[:2]),
                            ("ikeda", (*vocab.RECORD_ERRORS, vocab.RECORD_ROLLOUT))):
        run_dir = train_run(tmp_path / dataset, f"dataset={dataset}", "+condition=EX",
                            "beta=0.1", *TOY, "train.epochs=2", "train.warmup=1", f"results_root={tmp_path}")
        record = json.loads((run_dir / vocab.RECORD).read_text())
        assert sorted(record) == sorted(vocab.RECORD_FIELDS)
        assert sorted(record["metrics"]) == sorted((*errors, *vocab.RECORD_STRUCTURE))
        assert set(vocab.RECORD_TIMING) <= set(record["timing"])
