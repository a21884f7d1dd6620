"""labformer.masks: the True = may attend convention and its checks."""

from __future__ import annotations

import pytest
import torch

from labformer.masks import (
    causal_mask,
    check_mask,
    check_special_ids,
    combine_masks,
    from_key_padding_mask,
    padding_mask,
)


def test_causal_mask_is_lower_triangle():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    for i in range(4):
        for j in range(4):
            assert bool(m[i, j]) == (j <= i)


def test_causal_mask_size_one():
    assert causal_mask(1).tolist() == [[True]]


@pytest.mark.parametrize("bad", [0, -3, 2.0, "3"])
def test_causal_mask_bad_size(bad):
    with pytest.raises(ValueError, match="positive int size"):
        causal_mask(bad)


def test_padding_mask_values_and_shape():
    tokens = torch.tensor([[5, 6, 0, 0], [7, 0, 8, 0]])
    m = padding_mask(tokens)
    assert m.shape == (2, 1, 1, 4) and m.dtype == torch.bool
    assert m[:, 0, 0].tolist() == [[True, True, False, False], [True, False, True, False]]
    m9 = padding_mask(tokens, pad_id=5)
    assert m9[0, 0, 0].tolist() == [False, True, True, True]


def test_padding_mask_errors():
    with pytest.raises(ValueError, match=r"\(3,\)"):
        padding_mask(torch.tensor([1, 2, 0]))
    with pytest.raises(ValueError, match=r"\(1, 1, 2\)"):
        padding_mask(torch.ones(1, 1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="float"):
        padding_mask(torch.ones(2, 3))


def test_from_key_padding_mask_inverts():
    kpm = torch.tensor([[False, False, True], [False, True, True]])
    m = from_key_padding_mask(kpm)
    assert m.shape == (2, 1, 1, 3)
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_from_key_padding_mask_errors():
    with pytest.raises(ValueError, match=r"torch.int64 \(2, 3\)"):
        from_key_padding_mask(torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(2, 3, 1\)"):
        from_key_padding_mask(torch.zeros(2, 3, 1, dtype=torch.bool))


def test_combine_masks():
    causal = causal_mask(3)
    pad = padding_mask(torch.tensor([[4, 5, 0]]))
    out = combine_masks(causal, None, pad)
    assert out.shape == (1, 1, 3, 3)
    expected = [[True, False, False], [True, True, False], [True, True, False]]
    assert out[0, 0].tolist() == expected
    assert combine_masks() is None
    assert combine_masks(None, None) is None
    assert combine_masks(None, causal) is causal


def test_combine_masks_rejects_non_bool():
    with pytest.raises(ValueError, match="float32"):
        combine_masks(causal_mask(2), torch.ones(2, 2))
    with pytest.raises(ValueError, match="int64"):
        combine_masks(torch.ones(2, 2, dtype=torch.long))


def test_check_mask_accepts_broadcastable():
    scores = (2, 4, 3, 5)
    for shape in [(5,), (3, 5), (1, 5), (2, 1, 1, 5), (2, 4, 3, 5), (1, 1, 3, 5)]:
        check_mask(torch.ones(shape, dtype=torch.bool), scores)  # no error


def test_check_mask_errors():
    with pytest.raises(ValueError, match="list"):
        check_mask([[True]], (1, 1))
    with pytest.raises(ValueError, match=r"torch.float32 with shape \(3, 5\)"):
        check_mask(torch.ones(3, 5), (2, 4, 3, 5))
    with pytest.raises(ValueError, match=r"torch.int64"):
        check_mask(torch.ones(3, 5, dtype=torch.long), (2, 4, 3, 5))
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(2, 4, 3, 5\)"):
        check_mask(torch.ones(3, 4, dtype=torch.bool), (2, 4, 3, 5))
    with pytest.raises(ValueError, match=r"\(1, 2, 4, 3, 5\)"):
        check_mask(torch.ones(1, 2, 4, 3, 5, dtype=torch.bool), (2, 4, 3, 5))


VOCABS = {"src_vocab_size": 10, "tgt_vocab_size": 6}


def test_check_special_ids_accepts_distinct_ids_in_range():
    check_special_ids({"pad_id": 0, "bos_id": 1, "eos_id": 5}, VOCABS)  # no error


@pytest.mark.parametrize(
    "ids,message",
    [
        ({"pad_id": 0, "bos_id": 0}, r"bos_id and pad_id are both 0"),
        ({"pad_id": 0, "eos_id": 6}, r"eos_id=6 is not a valid id for tgt_vocab_size=6"),
        ({"unk_id": -1}, r"unk_id=-1 is not a valid id for src_vocab_size=10"),
        ({"pad_id": 1.0}, r"pad_id must be an int, got 1.0"),
        ({"pad_id": True}, r"pad_id must be an int, got True"),
    ],
)
def test_check_special_ids_errors_name_the_field(ids, message):
    with pytest.raises(ValueError, match=message):
        check_special_ids(ids, VOCABS)
