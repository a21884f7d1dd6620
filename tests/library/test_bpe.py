"""labformer.data.bpe: byte-level BPE, its round trip on any text, its merges worked by hand, its
compression, and why the merges must be applied in merge order."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labformer.data import everyday_pairs_path
from labformer.data.bpe import BPE, split_chunks

TOY = "low lower lowest newer wider"


def _corpus(n: int = 150) -> list[str]:
    """Both sides of the first n everyday pairs shipped with the package."""
    lines = everyday_pairs_path().read_text(encoding="utf-8").splitlines()[:n]
    return [side for line in lines for side in line.split("\t")]


@pytest.fixture(scope="module")
def trained() -> BPE:
    return BPE.train(_corpus(), 400)


def _replay(bpe: BPE, text: str) -> list[int]:
    """What training did to its own text: each merge in turn, over every chunk."""
    out = []
    for chunk in split_chunks(text):
        ids = list(chunk.encode("utf-8"))
        for rank, pair in enumerate(bpe.merges):
            ids = _merge_all(ids, pair, 256 + rank)
        out += ids
    return out


def _merge_all(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i : i + 2]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _out_of_order(bpe: BPE, text: str) -> list[int]:
    """A planted bug: the merges applied in reverse merge order (each once, to each chunk)."""
    out = []
    for chunk in split_chunks(text):
        ids = list(chunk.encode("utf-8"))
        for rank in reversed(range(len(bpe.merges))):
            ids = _merge_all(ids, bpe.merges[rank], 256 + rank)
        out += ids
    return out


# ---- the toy corpus, by hand ----------------------------------------------------------------

def test_toy_chunks_keep_the_space_with_the_next_word():
    assert split_chunks(TOY) == ["low", " lower", " lowest", " newer", " wider"]
    assert split_chunks("Il a 42 ans, non ?  ok_go\n") == [
        "Il", " a", " 42", " ans", ",", " non", " ?", " ", " ok", "_", "go", "\n"]


def test_first_merge_is_the_most_frequent_pair_counted_by_hand():
    # "er" occurs in lower, newer, wider: 3 times; "lo", "ow" and "we" also 3 times
    # (low, lower, lowest / lower, lowest, newer); ties go to the smallest pair of ids:
    # (e, r) = (101, 114) < (l, o) = (108, 111) < (o, w) < (w, e).
    bpe = BPE.train(TOY, 257)
    assert bpe.merges == [(ord("e"), ord("r"))]
    assert bpe.vocab[256] == b"er" and len(bpe) == 257
    # An untied count: "ab" 4 times, "ba" 2 times, "bc" 1 time
    assert BPE.train("abab abab bc", 257).merges == [(ord("a"), ord("b"))]


def test_the_toy_merge_sequence_worked_by_hand():
    bpe = BPE.train(TOY, 1000)
    # 1. er (3, ties broken as above); 2. lo (3: low, lower, lowest; ties with ow, also 3,
    # and (l, o) < (o, w)); 3. lo + w (3); 4. " " + low (2: lower, lowest). Then every pair
    # occurs once: training stops early, with 4 merges.
    assert [bpe.vocab[256 + i] for i in range(len(bpe.merges))] == [b"er", b"lo", b"low",
                                                                     b" low"]
    assert bpe.merges == [(101, 114), (108, 111), (257, 119), (32, 258)]
    assert bpe.pieces(TOY) == ["low", " low", "er", " low", "e", "s", "t", " ", "n", "e", "w",
                               "er", " ", "w", "i", "d", "er"]
    assert bpe.pieces("slower") == ["s", "low", "er"]  # an unseen word, from known pieces


def test_merges_out_of_order_give_another_segmentation():
    bpe = BPE.train(TOY, 1000)
    # In merge order: l o w e r -> l o w er -> lo w er -> low er. In reverse order "lo" comes
    # after "low" was tried (too early: there was no "lo" yet), leaving lo w er.
    assert bpe.encode("lower") == [258, 256]
    assert _out_of_order(bpe, "lower") == [257, ord("w"), 256]


def test_merges_out_of_order_cut_the_training_text_worse(trained):
    text = " ".join(_corpus())
    right, wrong = trained.encode(text), _out_of_order(trained, text)
    assert trained.decode(wrong) == text  # still a valid encoding, but a worse one
    assert len(wrong) > 1.1 * len(right)


def test_encode_reproduces_how_training_cut_its_text(trained):
    for text in _corpus()[:120]:
        assert trained.encode(text) == _replay(trained, text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40))
def test_rank_order_equals_merge_by_merge_replay_on_any_text(text):
    bpe = _toy_french()
    assert bpe.encode(text) == _replay(bpe, text)


# ---- round trip and compression -------------------------------------------------------------

_FRENCH = None


def _toy_french() -> BPE:
    global _FRENCH
    if _FRENCH is None:
        _FRENCH = BPE.train(_corpus(60), 330)
    return _FRENCH


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_decode_encode_is_the_identity_on_any_text(text):
    bpe = _toy_french()
    ids = bpe.encode(text)
    assert all(0 <= i < len(bpe) for i in ids)
    assert bpe.decode(ids) == text


@pytest.mark.parametrize("text", [
    "Élève « naïve » à l'hôtel, déjà !", "😀 emoji 🇫🇷 and 家 and ẞ", "zyxwv qwerty",
    "", " ", "\n\n\t  x", "e\u0301", "ab" * 500,
])
def test_round_trip_on_accents_guillemets_emoji_and_unseen_words(trained, text):
    assert trained.decode(trained.encode(text)) == text


def test_it_compresses_its_training_text(trained):
    text = "\n".join(_corpus())
    ratio = len(text.encode("utf-8")) / len(trained.encode(text))
    assert ratio > 1.5  # bytes per token
    assert len(trained) == 400 and len(trained.merges) == 144
    assert len(BPE.train(_corpus(), 256).encode(text)) == len(text.encode("utf-8"))


def test_first_merge_on_real_text_is_the_most_frequent_pair():
    texts = _corpus()
    counts: Counter[tuple[int, int]] = Counter()
    for text in texts:
        for chunk in split_chunks(text):
            b = chunk.encode("utf-8")
            counts.update(zip(b, b[1:], strict=False))
    best = max(counts.values())
    assert BPE.train(texts, 257).merges == [min(p for p, n in counts.items() if n == best)]


def test_rebuilt_from_its_merges_and_deterministic(trained):
    again = BPE(trained.merges)
    assert again.vocab == trained.vocab and again.merges == trained.merges
    assert BPE.train(_corpus(), 400).merges == trained.merges
    text = "Bonjour, je voudrais un café."
    assert again.encode(text) == trained.encode(text)
    # merged tokens are made of earlier ones
    assert all(a < 256 + i and b < 256 + i for i, (a, b) in enumerate(trained.merges))


def test_texts_never_merge_across_each_other():
    # "ab" in one text, "ab" split across two texts: only one occurrence counts.
    assert BPE.train(["xa", "by", "ab"], 300).merges == []
    assert BPE.train(["ab", "ab"], 300).merges == [(97, 98)]


def test_decode_of_part_of_a_character_shows_the_replacement_character():
    bpe = BPE()
    assert bpe.decode(list("é".encode())[:1]) == "\ufffd"
    assert bpe.pieces("é") == ["\ufffd", "\ufffd"]


def test_clear_errors():
    for size in (255, 0, 300.0, True):
        with pytest.raises(ValueError, match="vocab_size"):
            BPE.train(TOY, size)
    with pytest.raises(TypeError, match="str"):
        BPE.train([TOY, b"bytes"], 300)
    bpe = BPE.train(TOY, 300)
    for bad in (b"low", None, ["low"], 3):
        with pytest.raises(TypeError, match="str"):
            bpe.encode(bad)
    for ids in ([1000], [-1], [True]):
        with pytest.raises(ValueError, match="vocabulary"):
            bpe.decode(ids)
    for merges in ([(1, 300)], [(1, 2), (1, 2)]):
        with pytest.raises(ValueError, match="merge"):
            BPE(merges)
