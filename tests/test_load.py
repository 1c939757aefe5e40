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


def test_dir_lists_the_lazy_names():
    assert {"load_run", "TrainedRun", "__version__"} <= set(dir(kanx))
