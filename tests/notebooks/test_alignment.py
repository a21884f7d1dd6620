"""Tests for the toy corpus's word alignments (labformer.data.lexicon.align_content_words)."""

from __future__ import annotations

import pytest

from labformer.data import generate_corpus, tokenize
from labformer.data import lexicon as lx


def aligned_words(src: str, tgt: str) -> list[tuple[str, str]]:
    s, t = tokenize(src), tokenize(tgt)
    return [(t[i], s[j]) for i, j in lx.align_content_words(s, t)]


def test_crossing_alignment_of_postposed_adjectives():
    src, tgt = "le chat noir mange une pomme rouge.", "the black cat eats a red apple."
    assert aligned_words(src, tgt) == [("black", "noir"), ("cat", "chat"), ("eats", "mange"),
                                       ("red", "rouge"), ("apple", "pomme")]
    assert lx.align_content_words(tokenize(src), tokenize(tgt)) == [
        (1, 2), (2, 1), (3, 3), (5, 6), (6, 5)]


@pytest.mark.parametrize(("src", "tgt", "expected"), [
    # professions: no article in French, a/an in English; cities; verbs with a particle
    ("je suis étudiant.", "i am a student.", [("student", "étudiant")]),
    ("elle habite à londres.", "she lives in london.", [("lives", "habite"),
                                                         ("london", "londres")]),
    ("nous regardons le vieil homme.", "we look at the old man.",
     [("look", "regardons"), ("old", "vieil"), ("man", "homme")]),
    # grand is tall for people, big otherwise; porter is wear for clothes
    ("il porte une grande robe.", "he wears a big dress.",
     [("wears", "porte"), ("big", "grande"), ("dress", "robe")]),
    ("les filles sont grandes.", "the girls are tall.", [("girls", "filles"),
                                                          ("tall", "grandes")]),
])
def test_alignment_examples(src, tgt, expected):
    assert aligned_words(src, tgt) == expected


def test_function_words_are_not_aligned():
    words = {w for w, _ in aligned_words("est-ce que tu n'as pas de chat?",
                                         "do you not have a cat?")}
    assert words == {"cat"}, "pronouns, auxiliaries, articles and avoir are function words"


def test_ambiguous_counterparts_are_left_out():
    src, tgt = "le chat noir voit un chien noir.", "the black cat sees a black dog."
    assert aligned_words(src, tgt) == [("cat", "chat"), ("sees", "voit"), ("dog", "chien")]
    assert lx.align_content_words(tokenize(src), tokenize("")) == []


def test_every_alignment_in_the_corpus_is_a_translation_in_the_lexicon():
    table = lx.content_translations()
    corpus = generate_corpus(num_pairs=3000, seed=1, valid_size=100, test_size=100)
    aligned = content = 0
    for src, tgt in corpus.train:
        s, t = tokenize(src), tokenize(tgt)
        pairs = lx.align_content_words(s, t)
        assert [i for i, _ in pairs] == sorted({i for i, _ in pairs}), "one source per word"
        for i, j in pairs:
            assert s[j] in table[t[i]], f"{t[i]!r} aligned to {s[j]!r} in {src!r} -> {tgt!r}"
        aligned += len(pairs)
        content += sum(w in table for w in t)
    # an English content word goes unaligned only when its French form occurs twice
    assert aligned / content > 0.95, f"{aligned} of {content} content words aligned"


def test_every_english_content_word_of_the_lexicon_has_a_french_form():
    table = lx.content_translations()
    _, english = lx.lexicon_words()
    assert set(table) <= english
    assert all(table.values())
    for noun in lx.NOUNS:
        assert noun.fr in table[noun.en]
    for adj in lx.ADJECTIVES:
        assert set(adj.forms) <= table[adj.en]


def test_attention_views_and_alignment_hits_on_a_tiny_model():
    """labformer.book.alignment: teacher-forced batches, maps of the right shapes, hits that count
    only aligned words, and a view that points at the aligned word hits every time."""
    import torch

    from labformer.app.translate import Translator, build_model
    from labformer.book.alignment import (
        alignment_table,
        attention_maps,
        cross_attention_views,
        padded,
        teacher_forced,
    )
    from labformer.data import Vocab

    pairs = [("le chat noir mange une pomme rouge.", "the black cat eats a red apple."),
             ("le chien dort.", "the dog sleeps.")]
    sv = Vocab.build([tokenize(s) for s, _ in pairs])
    tv = Vocab.build([tokenize(t) for _, t in pairs])
    src, tgt_in = teacher_forced(pairs, sv, tv)
    assert src.shape == (2, 9) and tgt_in.shape == (2, 9)  # 8 tokens and EOS
    assert src[1, 5:].tolist() == [sv.pad_id] * 4 and src[1, 4] == sv.eos_id
    assert tgt_in[:, 0].tolist() == [tv.bos_id] * 2
    with pytest.raises(ValueError, match="no rows"):
        padded([], 0)

    model = build_model(sv, tv, d_model=16, num_heads=2, num_encoder_layers=1,
                        num_decoder_layers=2, d_ff=32, dropout=0.0, max_len=20)
    maps = attention_maps(model, sv, tv, pairs)
    assert maps["encoder self"].shape == (1, 2, 2, 9, 9)
    assert maps["cross"].shape == (2, 2, 2, 9, 9)
    views = cross_attention_views(Translator(model, sv, tv), pairs)
    assert views.shape == (2 + 4, 2, 9, 9)
    assert torch.allclose(views[1], maps["cross"][1].mean(1))

    def oracle(chunk):  # (2 views, B, T, S): view 0 at the aligned word, view 1 at EOS
        out = torch.zeros(2, len(chunk), 9, 9)
        for b, (s, t) in enumerate(chunk):
            for i, j in lx.align_content_words(tokenize(s), tokenize(t)):
                out[0, b, i, j] = 1
            out[1, b, :, len(tokenize(s))] = 1
        return out

    hits, chance, diagonal, crossing = alignment_table(oracle, pairs, batch_size=1)
    n_links = sum(len(lx.align_content_words(tokenize(s), tokenize(t))) for s, t in pairs)
    assert hits.shape == (2, n_links) and hits[0].all() and not hits[1].any()
    assert chance[0] == pytest.approx(1 / 9)
    assert crossing.sum() == 4  # noir/chat and rouge/pomme cross
    assert not diagonal[crossing].all()
    with pytest.raises(ValueError, match="batch_size"):
        alignment_table(oracle, pairs, batch_size=0)
