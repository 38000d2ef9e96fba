"""Run-length masks: written and read back in both orders, decoded as MLE-bench's graders decode them (1-indexed,
column-major unless row-major is asked), with the checks they make of a submitted string."""
import numpy as np
import pytest

from runner.common import rle


@pytest.mark.parametrize("order", rle.ORDERS)
def test_a_mask_written_reads_back_the_same_in_either_order(order):
    rng = np.random.default_rng(3)
    for height, width in ((1, 1), (7, 5), (16, 31)):
        for share in (0.0, 0.3, 1.0):
            mask = rng.random((height, width)) < share
            text = rle.encode(mask, order)
            assert (text == "") == (not mask.any())
            assert np.array_equal(rle.decode(text, height, width, order), mask)


def test_decoding_matches_mle_bench_column_major_and_row_major():
    # MLE-bench: rle_decode("1 3 10 5", 4, 5)
    assert rle.decode("1 3 10 5", 4, 5).astype(int).tolist() == [[1, 0, 0, 1, 0], [1, 0, 1, 1, 0], [1, 0, 1, 0, 0],
                                                                 [0, 0, 1, 0, 0]]
    # MLE-bench: rle_decode("2 2 7 1 18 10", 4, 5): the last run cut at the mask's end
    assert rle.decode("2 2 7 1 18 10", 4, 5).astype(int).tolist() == [[0, 0, 0, 0, 0], [1, 0, 0, 0, 1],
                                                                       [1, 1, 0, 0, 1], [0, 0, 0, 0, 1]]
    # MLE-bench (vesuvius' row-major reading): rle_decode("2 2 7 1", 5, 4).T
    assert rle.decode("2 2 7 1", 4, 5, "row").astype(int).tolist() == [[0, 1, 1, 0, 0], [0, 1, 0, 0, 0],
                                                                       [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]
    # MLE-bench: rle_encode([[0, 1, 1], [1, 1, 0]]) == [2, 4]
    assert rle.encode(np.array([[0, 1, 1], [1, 1, 0]])) == "2 4"


def test_empty_whole_and_written_forms():
    assert not rle.decode("", 3, 4).any() and not rle.decode("   ", 3, 4).any()
    assert rle.decode(rle.whole(3, 4), 3, 4).all() and rle.decode(rle.whole(3, 4), 3, 4, "row").all()
    assert rle.written(np.zeros((2, 2)), empty="-") == "-"
    assert rle.written(np.eye(2), "row", empty="-") == "1 1 4 1"


@pytest.mark.parametrize("text, problem", [("5 2 1 2", "rise"), ("1 5 3 2", "overlap"), ("0 2", "positive"),
                                           ("3 0", "positive"), ("1.5 2", "integer"), ("a b", "integer")])
def test_strings_graders_reject_are_refused_with_their_reason(text, problem):
    with pytest.raises(rle.RleError, match=problem):
        rle.decode(text, 10, 10)


def test_the_graders_leniencies_are_kept():
    # an unpaired last start, as MLE-bench's array arithmetic reads it: the one length serves it too (MLE-bench: 3
    # pixels), alone it is nothing, after several pairs it is refused; it is checked to rise either way
    assert rle.decode("2 2 9", 3, 3).sum() == 3
    assert rle.decode("5", 3, 3).sum() == 0
    for text in ("1 1 3 1 5", "5 2 1"):
        with pytest.raises(rle.RleError):
            rle.decode(text, 3, 3)
    # runs past the end are cut, and overlap only counts where the mask is
    assert rle.decode("8 5 20 3", 3, 3).sum() == 2
    assert rle.decode("12 5 13 2", 3, 3).sum() == 0
    with pytest.raises(rle.RleError, match="string"):
        rle.decode(float("nan"), 3, 3)
