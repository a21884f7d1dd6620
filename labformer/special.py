"""The special tokens every sequence here relies on, defined once.

Every labformer vocabulary (:class:`labformer.data.Vocab`) numbers them 0-3, and every
default that names one (a model configuration, a mask, the loss, batching, the test doubles)
reads it from here. Plain constants, no torch: the text tools import them too.
"""

from __future__ import annotations

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "SPECIAL_TOKENS", "UNK_ID"]

PAD_ID = 0  # padding: masked out of attention and of the loss
BOS_ID = 1  # begin of sentence: the decoder's first input, never generated
EOS_ID = 2  # end of sentence: decoding stops after it
UNK_ID = 3  # a word outside the vocabulary
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")  # their tokens, in id order
