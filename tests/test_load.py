"""kanx.load_run as a user calls it: predict on lists, NumPy and tensors; what `dir(kanx)` shows."""

import numpy as np
import pytest
import torch

import kanx


@pytest.fixture(scope="module")
def run(finished_efx):
    return kanx.load_run(finished_efx)


def test_predict_takes_lists_numpy_and_tensors_and_answers_in_kind(run):
    x = [[0.1, 0.2], [-0.3, 0.4]]
    from_tensor = run.predict(torch.tensor(x, dtype=torch.float64))
    from_numpy = run.predict(np.array(x))
    assert isinstance(from_tensor, torch.Tensor) and isinstance(from_numpy, np.ndarray) and from_numpy.shape == (2, 1)
    np.testing.assert_array_equal(from_numpy, from_tensor.numpy())
    np.testing.assert_array_equal(run.predict(x), from_numpy)
    one = run.predict([0.1, 0.2])  # one sample
    assert isinstance(one, np.ndarray) and one.shape == (1,) and one[0] == from_numpy[0, 0]


def test_predict_names_the_inputs_it_takes(run):
    with pytest.raises(ValueError, match=r"2's inputs \(x, y\).*got shape \(3,\)"):
        run.predict([0.1, 0.2, 0.3])


def test_predict_reads_a_dataframe_by_column_name_not_position(run):
    """Columns (y, x) are the same samples as (x, y): predict selects them by the run's input
    names, where a positional read would swap the inputs and silently answer otherwise."""
    pd = pytest.importorskip("pandas")
    x = np.array([[0.1, 0.7], [-0.3, 0.4], [0.9, -0.8]])
    ordered = run.predict(pd.DataFrame(x, columns=["x", "y"]))
    reordered = run.predict(pd.DataFrame(x[:, ::-1], columns=["y", "x"]))
    np.testing.assert_array_equal(reordered, ordered)
    np.testing.assert_array_equal(ordered, run.predict(x))
    swapped = run.predict(x[:, ::-1])  # a NumPy view with a negative stride is read as its values
    np.testing.assert_array_equal(swapped, run.predict(x[:, ::-1].copy()))
    assert not np.array_equal(swapped, ordered)  # the swap that the names undo changes the answer
    one = run.predict(pd.Series({"y": 0.7, "x": 0.1}))  # a Series is one sample, read by its index
    assert one.shape == (1,) and one[0] == ordered[0, 0]


@pytest.mark.parametrize(("columns", "wrong"), [
    (["x", "y", "z"], "extra z"),
    (["x"], "missing y"),
    (["y", "z"], "missing x; extra z"),
    (["x", "x", "y"], "repeated x"),
])
def test_predict_refuses_a_dataframe_whose_columns_are_not_the_inputs(run, columns, wrong):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.zeros((2, len(columns))), columns=columns)
    with pytest.raises(ValueError) as e:
        run.predict(frame)
    message = str(e.value)
    assert "\n" not in message and f"columns ({', '.join(columns)}) must be the run's inputs (x, y)" in message
    assert message.endswith(wrong)


def test_dir_lists_the_lazy_names():
    assert {"load_run", "load_runs", "TrainedRun", "__version__"} <= set(dir(kanx))


def test_load_runs_is_the_analysis_loader_with_a_row_per_record(finished_efx):
    from kanx.analyze.collect import load_runs

    runs = kanx.load_runs(finished_efx.parents[2])
    assert kanx.load_runs is load_runs
    assert list(runs[["condition", "beta", "seed"]].itertuples(index=False, name=None)) == [("EFX", 0.1, 0)]
    assert runs["test_rmse"].iloc[0] == run_metrics(finished_efx)["test_rmse"]


def run_metrics(run_dir):
    import json

    return json.loads((run_dir / "record.json").read_text())["metrics"]
