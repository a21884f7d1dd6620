"""Special ids (PAD, BOS, EOS, UNK): defined once, in labformer.special, and read from there."""

import inspect
import re
from pathlib import Path

from labformer import special
from labformer.book.testing import PrefixTableModel, TableConfig
from labformer.data import Vocab, make_batches, pad_sequences
from labformer.loss import LabelSmoothingLoss, label_smoothed_cross_entropy, smoothed_targets
from labformer.masks import padding_mask
from labformer.rnn import Seq2SeqRNN
from labformer.transformer import TransformerConfig

PACKAGE = Path(special.__file__).parent
IDS = {"pad_id": special.PAD_ID, "bos_id": special.BOS_ID, "eos_id": special.EOS_ID,
       "unk_id": special.UNK_ID}


def _default(fn, name):
    return inspect.signature(fn).parameters[name].default


def test_every_default_is_the_one_definition():
    assert Vocab([]).special_ids() == IDS
    assert tuple(Vocab([]).itos) == special.SPECIAL_TOKENS
    cfg = TransformerConfig(src_vocab_size=8, tgt_vocab_size=8)
    assert {name: getattr(cfg, name) for name in IDS} == IDS
    for fn in (Seq2SeqRNN.__init__, PrefixTableModel.__init__):
        for name in set(IDS) & set(inspect.signature(fn).parameters):
            assert _default(fn, name) == IDS[name], (fn, name)
    assert {n: getattr(TableConfig(5), n) for n in ("pad_id", "bos_id", "eos_id")} == {
        n: IDS[n] for n in ("pad_id", "bos_id", "eos_id")}
    assert _default(padding_mask, "pad_id") == special.PAD_ID
    assert _default(pad_sequences, "pad_id") == special.PAD_ID
    for fn in (label_smoothed_cross_entropy, smoothed_targets, LabelSmoothingLoss.__init__):
        assert _default(fn, "ignore_index") == special.PAD_ID


def test_batches_frame_targets_with_the_special_ids():
    (batch,) = make_batches([([5, 6, special.EOS_ID], [7, special.EOS_ID]),
                             ([5, special.EOS_ID], [7, 8, 9, special.EOS_ID])], 2,
                            shuffle=False)
    assert batch.tgt_in[:, 0].tolist() == [special.BOS_ID] * 2
    assert sorted(batch.tgt_out.tolist()) == [[7, special.EOS_ID, special.PAD_ID, special.PAD_ID],
                                              [7, 8, 9, special.EOS_ID]]


def test_no_module_repeats_a_special_id_literal():
    # "pad_id: int = 0" or "ignore_index=0" anywhere but labformer/special.py is a second
    # definition that can drift from the first.
    literal = re.compile(r"\b(pad|bos|eos|unk)_id\b\s*(:[^=\n]+)?=\s*\d|ignore_index[^=\n]*=\s*\d")
    offenders = [f"{path.relative_to(PACKAGE)}:{n}"
                 for path in sorted(PACKAGE.rglob("*.py")) if path.name != "special.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if literal.search(line.split("#")[0])]
    assert offenders == []
