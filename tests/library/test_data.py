"""Tests for labformer.data: the toy corpus grammar, splits, vocabulary, batches, files."""

from __future__ import annotations

import random
import re
import unicodedata
from itertools import pairwise
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from labformer.data import (
    Batch,
    Corpus,
    TextCodec,
    Vocab,
    build_vocabs,
    candidate_pairs,
    detokenize,
    encode_pairs,
    everyday_pairs_path,
    generate_corpus,
    guess_language,
    load_pairs,
    make_batches,
    normalize_text,
    pad_sequences,
    padding_fraction,
    read_pairs,
    save_pairs,
    tokenize,
)
from labformer.data import lexicon as lx
from labformer.data.corpus import choose_heldout_pairs
from labformer.data.grammar import SentenceGenerator, english_surface, french_surface
from labformer.data.vocab import SPECIALS

# ------------------------------------------------------------------ helpers and fixtures

NOUN_FORMS = {f: n for n in lx.NOUNS for f in (n.fr, n.fr_pl) if f}
ADJ_FORMS: dict[str, list[lx.Adjective]] = {}
for _adj in lx.ADJECTIVES:
    for _form in {*_adj.forms, *([_adj.before_vowel] if _adj.before_vowel else [])}:
        ADJ_FORMS.setdefault(_form, []).append(_adj)
ETRE_FORMS = set(lx.ETRE.forms)
PUNCT = {".", "?"}


def noun_slot(form: str) -> tuple[bool, bool]:
    """(feminine, plural) of a noun form."""
    noun = NOUN_FORMS[form]
    return noun.feminine, form == noun.fr_pl


def adjective_slots(form: str) -> set[tuple[bool, bool]]:
    """Every (feminine, plural) an adjective form can agree with."""
    slots = set()
    for adj in ADJ_FORMS[form]:
        for i, f in enumerate(adj.forms):
            if f == form:
                slots.add((bool(i % 2), i >= 2))
        if form == adj.before_vowel:
            slots.add((False, False))
    return slots


def adjective_noun_pairs(tokens: list[str]) -> set[tuple[str, str]]:
    """(adjective lemma, noun) pairs in a French sentence, attributive or predicative."""
    pairs = set()
    for i, tok in enumerate(tokens):
        if tok not in NOUN_FORMS:
            continue
        noun = NOUN_FORMS[tok].fr
        for j in (i - 1, i + 1):
            if 0 <= j < len(tokens) and tokens[j] in ADJ_FORMS:
                pairs |= {(a.lemma, noun) for a in ADJ_FORMS[tokens[j]]
                          if a.preposed == (j < i)}
    for i, tok in enumerate(tokens):  # predicative: "<subject noun> (ne) est (pas) ADJ ."
        if tok in ("est", "sont"):
            k = i + 2 if tokens[i + 1] == "pas" else i + 1
            if tokens[k] in ADJ_FORMS and tokens[k + 1] in PUNCT:
                nouns = [t for t in tokens[:i] if t in NOUN_FORMS]
                if nouns:
                    pairs |= {(a.lemma, NOUN_FORMS[nouns[-1]].fr) for a in ADJ_FORMS[tokens[k]]}
    return pairs


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return generate_corpus(8000, seed=3, valid_size=500, test_size=600)


@pytest.fixture(scope="module")
def fr_sentences(corpus: Corpus) -> list[list[str]]:
    return [tokenize(s) for s, _ in corpus.train + corpus.valid + corpus.test]


@pytest.fixture(scope="module")
def en_sentences(corpus: Corpus) -> list[list[str]]:
    return [tokenize(t) for _, t in corpus.train + corpus.valid + corpus.test]


# ------------------------------------------------------------------------- corpus


def test_same_seed_same_corpus_other_seed_different() -> None:
    a = generate_corpus(3000, seed=7, valid_size=200, test_size=200)
    b = generate_corpus(3000, seed=7, valid_size=200, test_size=200)
    c = generate_corpus(3000, seed=8, valid_size=200, test_size=200)
    assert a == b
    assert a.train != c.train and a.test != c.test
    assert a.heldout_pairs != c.heldout_pairs


def test_split_sizes_are_configurable_and_disjoint() -> None:
    c = generate_corpus(2500, seed=1, valid_size=300, test_size=400, heldout_share=0.25)
    assert (len(c.train), len(c.valid), len(c.test)) == (1800, 300, 400)
    assert sum(c.test_heldout) == 100 and len(c.test_heldout) == 400
    sources = [s for s, _ in c.train + c.valid + c.test]
    assert len(set(sources)) == len(sources)  # no sentence in two splits, nor twice


def test_default_corpus_size() -> None:
    c = generate_corpus()
    assert (len(c.train), len(c.valid), len(c.test)) == (28000, 1000, 1000)


def test_en_fr_swaps_the_sides() -> None:
    fr_en = generate_corpus(1500, seed=2, valid_size=100, test_size=100)
    en_fr = generate_corpus(1500, seed=2, direction="en-fr", valid_size=100, test_size=100)
    assert en_fr.train == [(t, s) for s, t in fr_en.train]
    assert en_fr.test == [(t, s) for s, t in fr_en.test]
    assert en_fr.direction == "en-fr" and en_fr.heldout_pairs == fr_en.heldout_pairs


@pytest.mark.parametrize("kwargs", [
    {"direction": "de-en"},
    {"num_pairs": 100, "valid_size": 50, "test_size": 50},
    {"valid_size": -1},
    {"heldout_share": 1.5},
    {"num_heldout": 10_000},
])
def test_bad_arguments_raise(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        generate_corpus(**{"num_pairs": 1000, "valid_size": 10, "test_size": 10, **kwargs})


def test_asking_for_more_sentences_than_budget_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def always_the_same(self, forced=None):
        return ["je", "dors", "."], ["i", "sleep", "."], set()

    monkeypatch.setattr(SentenceGenerator, "sentence", always_the_same)
    with pytest.raises(RuntimeError, match="distinct sentences"):
        generate_corpus(100, valid_size=10, test_size=10, num_heldout=0)


def test_sentence_lengths(fr_sentences: list[list[str]], en_sentences: list[list[str]]) -> None:
    for tokens in fr_sentences + en_sentences:
        assert 2 <= len(tokens) <= 20, tokens
        assert tokens[-1] in PUNCT


def test_lexicon_has_at_least_150_words(fr_sentences: list[list[str]],
                                        en_sentences: list[list[str]]) -> None:
    fr_words, en_words = lx.lexicon_words()
    assert len(fr_words) >= 150 and len(en_words) >= 150
    assert len({w for s in fr_sentences for w in s}) >= 150
    assert len({w for s in en_sentences for w in s}) >= 150
    others = {*lx.TRANSITIVE_VERBS, *lx.INTRANSITIVE_VERBS, lx.ALLER, lx.VENIR, lx.HABITER}
    assert len(others) >= 20


def test_no_homographs_between_word_classes() -> None:
    """A word form is a noun, an adjective or a verb, never two (the tests rely on it)."""
    verbs = {f for v in (lx.ETRE, lx.AVOIR, lx.ALLER, lx.VENIR, lx.HABITER,
                         *lx.TRANSITIVE_VERBS, *lx.INTRANSITIVE_VERBS) for f in v.forms}
    assert not set(NOUN_FORMS) & set(ADJ_FORMS)
    assert not (set(NOUN_FORMS) | set(ADJ_FORMS)) & verbs


def test_fr_en_is_a_function() -> None:
    gen = SentenceGenerator(random.Random(11))
    seen: dict[str, str] = {}
    for _ in range(30_000):
        fr, en, _ = gen.sentence()
        src, tgt = detokenize(fr), detokenize(en)
        assert seen.setdefault(src, tgt) == tgt, (src, seen[src], tgt)


# --------------------------------------------------------------------- held-out pairs


def test_heldout_pairs_absent_from_train_and_valid(corpus: Corpus) -> None:
    heldout = set(corpus.heldout_pairs)
    assert len(heldout) == 12
    for src, _ in corpus.train + corpus.valid:
        assert not adjective_noun_pairs(tokenize(src)) & heldout, src


def test_heldout_pairs_in_test_and_flags_match(corpus: Corpus) -> None:
    heldout = set(corpus.heldout_pairs)
    found: set[tuple[str, str]] = set()
    for (src, _), flag in zip(corpus.test, corpus.test_heldout, strict=True):
        in_test = adjective_noun_pairs(tokenize(src)) & heldout
        assert bool(in_test) == flag, src
        found |= in_test
    assert found == heldout
    assert 0 < sum(corpus.test_heldout) < len(corpus.test)


def test_heldout_words_are_frequent_in_train(corpus: Corpus) -> None:
    train_fr = [tokenize(s) for s, _ in corpus.train]
    all_pairs = set().union(*(adjective_noun_pairs(t) for t in train_fr))
    for adj, noun in corpus.heldout_pairs:
        assert sum(a == adj for a, _ in all_pairs) >= 3  # the adjective with other nouns
        noun_forms = {f for n in lx.NOUNS if n.fr == noun for f in (n.fr, n.fr_pl) if f}
        assert sum(bool(noun_forms & set(t)) for t in train_fr) >= 20


def test_heldout_pairs_use_distinct_words() -> None:
    pairs = choose_heldout_pairs(15, random.Random(0))
    assert len({a for a, _ in pairs}) == len({n for _, n in pairs}) == 15
    assert set(pairs) <= set(candidate_pairs())


def test_stats_and_describe(corpus: Corpus) -> None:
    stats = corpus.stats
    assert stats["train"] == len(corpus.train) and stats["test_heldout"] == 300
    assert stats["src_len"][0] >= 2 and stats["tgt_len"][1] <= 20
    text = corpus.describe()
    assert "train 6900" in text and "held-out pairs" in text
    assert f"{corpus.heldout_pairs[0][0]}+{corpus.heldout_pairs[0][1]}" in text


# ------------------------------------------------------------------------- grammar


def test_article_example_from_the_source() -> None:
    gen = SentenceGenerator(random.Random(0))
    examples = set()
    for _ in range(20_000):
        fr, en, _ = gen.sentence()
        examples.add((detokenize(fr), detokenize(en)))
    assert ("je suis étudiant.", "i am a student.") in examples
    assert ("elle est ingénieure.", "she is an engineer.") in examples
    assert ("nous sommes médecins.", "we are doctors.") in examples


def test_adjective_position(fr_sentences: list[list[str]],
                            en_sentences: list[list[str]]) -> None:
    pre = post = 0
    for tokens in fr_sentences:
        for left, right in pairwise(tokens):
            if left in ADJ_FORMS and right in NOUN_FORMS:  # adjective before the noun
                assert all(a.preposed for a in ADJ_FORMS[left]), tokens
                pre += 1
            if left in NOUN_FORMS and right in ADJ_FORMS:  # adjective after the noun
                assert not any(a.preposed for a in ADJ_FORMS[right]), tokens
                post += 1
    assert pre > 500 and post > 500
    en_nouns = {w for n in lx.NOUNS for w in (n.en, n.en_pl) if w}
    en_adjs = {w for a in lx.ADJECTIVES for w in (a.en, a.en_person) if w}
    assert not en_nouns & en_adjs
    for tokens in en_sentences:  # English: attributive adjectives before their noun
        for i, (left, right) in enumerate(pairwise(tokens)):
            predicative = tokens[0] in ("is", "are") and tokens[i + 2:i + 3] == ["?"]  # is it red?
            assert predicative or not (left in en_nouns and right in en_adjs), tokens


def test_noun_adjective_reordering_example() -> None:
    gen = SentenceGenerator(random.Random(4))
    for _ in range(5000):
        fr, en, _ = gen.sentence()
        if "petit" in fr and "noir" in fr and fr[fr.index("petit") + 2] == "noir":
            noun = NOUN_FORMS[fr[fr.index("petit") + 1]]
            i = en.index("small")
            assert en[i:i + 3] == ["small", "black", noun.en]
            return
    pytest.fail("no 'petit X noir' noun phrase generated")


def test_agreement_of_articles_and_adjectives(fr_sentences: list[list[str]]) -> None:
    checked = 0
    for tokens in fr_sentences:
        for i, tok in enumerate(tokens):
            if tok not in NOUN_FORMS:
                continue
            fem, plural = noun_slot(tok)
            if i + 1 < len(tokens) and tokens[i + 1] in ADJ_FORMS:
                assert (fem, plural) in adjective_slots(tokens[i + 1]), tokens
                checked += 1
            if i > 0 and tokens[i - 1] in ADJ_FORMS:
                assert (fem, plural) in adjective_slots(tokens[i - 1]), tokens
                article = tokens[i - 2]
            else:
                article = tokens[i - 1]
            assert not (article in ("le", "un", "du", "au") and (fem or plural)), tokens
            assert not (article in ("la", "une") and (not fem or plural)), tokens
            assert not (article in ("les", "des", "aux", "mes", "nos") and not plural), tokens
    assert checked > 1000


def test_vowel_forms_of_preposed_adjectives(fr_sentences: list[list[str]]) -> None:
    found = 0
    for tokens in fr_sentences:
        for left, right in pairwise(tokens):
            if left in ("vieil", "bel", "nouvel"):
                noun = NOUN_FORMS[right]
                assert not noun.feminine and right == noun.fr and lx.starts_with_vowel(right)
                found += 1
            if left in ("vieux", "beau", "nouveau") and right in NOUN_FORMS:
                assert not lx.starts_with_vowel(right) or right == NOUN_FORMS[right].fr_pl
    assert found > 0


def test_elision(fr_sentences: list[list[str]]) -> None:
    elided = {"l'": 0, "j'": 0, "n'": 0, "d'": 0, "qu'": 0}
    for tokens in fr_sentences:
        for left, right in pairwise(tokens):
            if left in ("le", "la", "je", "ne", "de", "que", "ma", "ta"):
                assert not lx.starts_with_vowel(right), tokens
            if left in elided:
                assert lx.starts_with_vowel(right), tokens
                elided[left] += 1
    assert all(elided.values()), elided
    assert ("j'", "ai") in {(a, b) for s in fr_sentences for a, b in pairwise(s)}


def test_surface_rules_directly() -> None:
    assert french_surface(["je", "ai", "le", "ami"]) == ["j'", "ai", "l'", "ami"]
    assert french_surface(["à", "le", "marché", "de", "les", "gares"]) == [
        "au", "marché", "des", "gares"]
    assert french_surface(["à", "le", "hôtel", "ma", "amie", "de", "huit"]) == [
        "à", "l'", "hôtel", "mon", "amie", "de", "huit"]
    assert english_surface(["a", "old", "man", "a", "cat", "a"]) == [
        "an", "old", "man", "a", "cat", "a"]


def test_contractions(fr_sentences: list[list[str]]) -> None:
    bigrams = {(a, b) for s in fr_sentences for a, b in pairwise(s)}
    assert not bigrams & {("à", "le"), ("à", "les"), ("de", "le"), ("de", "les")}
    words = {w for s in fr_sentences for w in s}
    assert {"au", "aux", "du", "des"} <= words


def test_negation(corpus: Corpus) -> None:
    negated = 0
    for src, tgt in corpus.train:
        fr, en = tokenize(src), tokenize(tgt)
        assert ("pas" in fr) == ("not" in en), (src, tgt)
        if "pas" in fr:
            negated += 1
            neg = fr.index("ne") if "ne" in fr else fr.index("n'")
            assert fr.index("pas") == neg + 2  # ne VERB pas
        pas_de = "pas" in fr and fr[fr.index("pas") + 1] in ("de", "d'")
        if pas_de and fr[fr.index("pas") - 1] not in lx.VENIR.forms:  # not "venir de"
            assert any(w in en for w in ("a", "an", "any")), (src, tgt)
    assert negated > 0.1 * len(corpus.train)


def test_questions(corpus: Corpus) -> None:
    for src, tgt in corpus.train[:3000]:
        fr, en = tokenize(src), tokenize(tgt)
        assert (fr[0] == "est-ce") == (fr[-1] == "?") == (en[-1] == "?")
        if fr[0] == "est-ce":
            assert fr[1] in ("que", "qu'")
            assert en[0] in ("do", "does", "am", "is", "are"), tgt


def test_professions_take_no_article_in_french(corpus: Corpus) -> None:
    forms = {f: p for p in lx.PROFESSIONS for f in p.forms}
    seen = 0
    for src, tgt in corpus.train:
        fr, en = tokenize(src), tokenize(tgt)
        for i, tok in enumerate(fr):
            if tok in forms:
                seen += 1
                assert fr[i - 1] in ETRE_FORMS or fr[i - 1] == "pas", src
                prof = forms[tok]
                if tok in prof.forms[:2]:  # singular: a/an in English
                    j = en.index(prof.en.split()[0])
                    assert en[j - 1] == ("an" if prof.en[0] in "aeiou" else "a"), tgt
                else:
                    assert prof.en_pl.split()[0] in en, tgt
    assert seen > 100


def test_a_and_an(en_sentences: list[list[str]]) -> None:
    for tokens in en_sentences:
        for left, right in pairwise(tokens):
            if left == "a":
                assert right[0] not in "aeiou", tokens
            if left == "an":
                assert right[0] in "aeiou", tokens


def test_pronouns_conjugate_their_verb(fr_sentences: list[list[str]]) -> None:
    verbs = [lx.ETRE, lx.AVOIR, lx.ALLER, lx.VENIR, lx.HABITER, *lx.TRANSITIVE_VERBS,
             *lx.INTRANSITIVE_VERBS]
    by_person = [{v.forms[p] for v in verbs} for p in range(6)]
    person = {"je": 0, "j'": 0, "tu": 1, "il": 2, "elle": 2, "nous": 3, "vous": 4, "ils": 5,
              "elles": 5}
    checked = 0
    for tokens in fr_sentences:
        start = 2 if tokens[0] == "est-ce" else 0
        first = tokens[start]
        if first in person and tokens[start + 1] != "y":  # not "il y a"
            verb = tokens[start + 2] if tokens[start + 1] in ("ne", "n'") else tokens[start + 1]
            assert verb in by_person[person[first]], tokens
            checked += 1
    assert checked > 1000


def test_grand_is_tall_for_people_and_big_otherwise(corpus: Corpus) -> None:
    for src, tgt in corpus.train:
        fr, en = tokenize(src), tokenize(tgt)
        for i, tok in enumerate(fr[:-1]):
            if tok in ("grand", "grande", "grands", "grandes") and fr[i + 1] in NOUN_FORMS:
                cls = NOUN_FORMS[fr[i + 1]].cls
                assert ("tall" if cls == lx.PERSON else "big") in en, (src, tgt)


# ------------------------------------------------------------------------ tokenizer


def test_tokenize_examples() -> None:
    assert tokenize("J'ai un chat.") == ["j'", "ai", "un", "chat", "."]
    assert tokenize("l'homme") == ["l'", "homme"]
    assert tokenize("Est-ce qu'il mange ?") == ["est-ce", "qu'", "il", "mange", "?"]
    assert tokenize("l\u2019eau") == ["l'", "eau"]
    assert tokenize("") == []


def test_detokenize_examples() -> None:
    assert detokenize(["j'", "ai", "un", "chat", "."]) == "j'ai un chat."
    assert detokenize(["est-ce", "qu'", "il", "dort", "?"]) == "est-ce qu'il dort?"
    assert detokenize([]) == ""


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_tokenize_detokenize_round_trip(seed: int) -> None:
    fr, en, _ = SentenceGenerator(random.Random(seed)).sentence()
    for tokens in (fr, en):
        text = detokenize(tokens)
        assert tokenize(text) == tokens
        assert detokenize(tokenize(text)) == text


def test_round_trip_on_corpus(corpus: Corpus) -> None:
    for src, tgt in corpus.test:
        assert detokenize(tokenize(src)) == src and detokenize(tokenize(tgt)) == tgt


# ---------------------------------------------------------------------------- vocab


def test_vocab_special_ids() -> None:
    ids = (Vocab.pad_id, Vocab.bos_id, Vocab.eos_id, Vocab.unk_id)
    assert ids == (0, 1, 2, 3) and len(set(ids)) == 4
    vocab = Vocab.build([["a", "b"]])
    assert [vocab.id_to_token(i) for i in ids] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    # What a model's config takes: the one place the ids are written down for a model.
    assert vocab.special_ids() == {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}
    assert [vocab.token_to_id(t) for t in SPECIALS] == list(vocab.special_ids().values())


def test_vocab_build_order_and_min_freq() -> None:
    vocab = Vocab.build([["b", "a", "c"], ["a", "b"], ["a"]], min_freq=2)
    assert vocab.itos[4:] == ["a", "b"]
    assert len(vocab) == 6 and "a" in vocab and "c" not in vocab
    assert Vocab.build([["<unk>", "x"]]).itos[4:] == ["x"]
    with pytest.raises(ValueError):
        Vocab.build([["a"]], min_freq=0)
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(["a", "a"])
    assert repr(vocab) == "Vocab(size=6)"


def test_encode_decode() -> None:
    vocab = Vocab.build([["je", "suis", "étudiant", "."]])
    ids = vocab.encode(["je", "suis", "médecin", "."], add_bos=True)
    assert ids[0] == Vocab.bos_id and ids[-1] == Vocab.eos_id
    assert ids[3] == Vocab.unk_id
    assert vocab.encode(["je"], add_eos=False) == [vocab.token_to_id("je")]
    assert vocab.decode(ids) == ["je", "suis", "<unk>", "."]
    assert vocab.decode(ids, strip_special=False) == ["<bos>", "je", "suis", "<unk>", ".",
                                                      "<eos>"]
    # decoding stops at EOS and skips PAD; tensors are accepted
    tail = torch.tensor([vocab.token_to_id("je"), 0, Vocab.eos_id, vocab.token_to_id(".")])
    assert vocab.decode(tail) == ["je"]
    assert vocab.lookup_unknown(["je", "médecin", "x"]) == ["médecin", "x"]
    with pytest.raises(ValueError, match="out of range"):
        vocab.id_to_token(len(vocab))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.text(alphabet="abcdéèç'", min_size=1, max_size=6), max_size=8),
                min_size=1, max_size=6))
def test_vocab_round_trip(token_lists: list[list[str]]) -> None:
    vocab = Vocab.build(token_lists)
    for tokens in token_lists:
        assert vocab.decode(vocab.encode(tokens, add_bos=True)) == tokens
    restored = Vocab.from_dict(vocab.to_dict())
    assert restored == vocab and restored.itos == vocab.itos


def test_vocab_dict_is_plain_json() -> None:
    import json
    vocab = Vocab.build([["x", "y"]])
    assert Vocab.from_dict(json.loads(json.dumps(vocab.to_dict()))) == vocab
    assert vocab != Vocab.build([["y"]]) and vocab != "x"
    with pytest.raises(ValueError):
        Vocab.from_dict({"words": []})
    with pytest.raises(ValueError, match="special"):
        Vocab.from_dict({"specials": ["<pad>"], "tokens": []})


# -------------------------------------------------------------------------- batches


def _toy_ids() -> list[tuple[list[int], list[int]]]:
    """Random pairs whose target length follows the source length, as in translation."""
    rng = random.Random(0)
    pairs = []
    for _ in range(300):
        n = rng.randint(1, 18)
        m = max(1, n + rng.randint(-1, 1))
        pairs.append(([rng.randrange(4, 20) for _ in range(n)] + [Vocab.eos_id],
                      [rng.randrange(4, 20) for _ in range(m)] + [Vocab.eos_id]))
    return pairs


def test_batches_shift_and_pad() -> None:
    pairs = [([5, 6, 2], [7, 8, 9, 2]), ([5, 2], [7, 2])]
    (batch,) = make_batches(pairs, batch_size=2, shuffle=False)
    order = batch.index.tolist()
    assert sorted(order) == [0, 1]
    rows = {i: r for r, i in enumerate(order)}
    assert batch.src[rows[0]].tolist() == [5, 6, 2]
    assert batch.src[rows[1]].tolist() == [5, 2, 0]
    assert batch.tgt_in[rows[0]].tolist() == [1, 7, 8, 9]
    assert batch.tgt_out[rows[0]].tolist() == [7, 8, 9, 2]
    assert batch.tgt_in[rows[1]].tolist() == [1, 7, 0, 0]
    assert batch.tgt_out[rows[1]].tolist() == [7, 2, 0, 0]
    assert batch.src.dtype == torch.long and batch.num_tokens == 6
    assert batch.to("cpu").src.equal(batch.src)


def test_batches_accept_bos_and_reject_missing_eos() -> None:
    (batch,) = make_batches([([5, 2], [1, 7, 2])], batch_size=4, shuffle=False)
    assert batch.tgt_in.tolist() == [[1, 7]] and batch.tgt_out.tolist() == [[7, 2]]
    with pytest.raises(ValueError, match="EOS"):
        make_batches([([5, 2], [7, 8])], batch_size=4)
    with pytest.raises(ValueError):
        make_batches([([5, 2], [7, 2])], batch_size=0)


def test_batches_cover_every_pair_once_and_are_deterministic() -> None:
    pairs = _toy_ids()
    batches = make_batches(pairs, batch_size=32, shuffle=True, seed=3)
    again = make_batches(pairs, batch_size=32, shuffle=True, seed=3)
    other = make_batches(pairs, batch_size=32, shuffle=True, seed=4)
    assert sorted(i for b in batches for i in b.index.tolist()) == list(range(len(pairs)))
    assert all(x.src.equal(y.src) and x.index.equal(y.index)
               for x, y in zip(batches, again, strict=True))
    assert [b.index.tolist() for b in batches] != [b.index.tolist() for b in other]
    assert all(isinstance(b, Batch) and b.src.size(0) <= 32 for b in batches)
    for b in batches:  # each row holds the pair it claims
        for row, i in enumerate(b.index.tolist()):
            src = b.src[row][b.src[row] != 0].tolist()
            assert src == pairs[i][0]


def test_bucketing_reduces_padding() -> None:
    pairs = _toy_ids()
    bucketed = padding_fraction(make_batches(pairs, 16, shuffle=True, seed=0))
    random_batches = padding_fraction(make_batches(pairs, 16, shuffle=True, seed=0,
                                                   sort_window=1))
    assert bucketed < 0.5 * random_batches
    assert padding_fraction([]) == 0.0


def test_pad_sequences() -> None:
    assert pad_sequences([[1, 2, 3], [4]]).tolist() == [[1, 2, 3], [4, 0, 0]]
    with pytest.raises(ValueError):
        pad_sequences([])


def test_encode_pairs_with_corpus_vocabs(corpus: Corpus) -> None:
    src_vocab, tgt_vocab = build_vocabs(corpus.train)
    ids = encode_pairs(corpus.test, src_vocab, tgt_vocab)
    src, tgt = corpus.test[0]
    assert detokenize(src_vocab.decode(ids[0][0])) == src
    assert detokenize(tgt_vocab.decode(ids[0][1])) == tgt
    assert all(s[-1] == Vocab.eos_id and t[-1] == Vocab.eos_id for s, t in ids)
    unknown = {w for s, _ in corpus.test for w in src_vocab.lookup_unknown(tokenize(s))}
    assert not unknown  # the test split uses only words seen in training


# ---------------------------------------------------------------------- pairs files


def test_load_pairs_tatoeba_format(tmp_path) -> None:
    path = tmp_path / "fra.txt"
    path.write_text("\ufeffGo.\tVa !\tCC-BY 2.0 (France) #2877272\n\n"
                    "Hi.\tSalut !\r\n  \nI am a student.\tJe suis étudiant.\tCC-BY\n",
                    encoding="utf-8")
    assert load_pairs(path) == [("Go.", "Va !"), ("Hi.", "Salut !"),
                                ("I am a student.", "Je suis étudiant.")]
    assert load_pairs(str(path), src_col=1, tgt_col=0)[0] == ("Va !", "Go.")


def test_save_then_load(tmp_path, corpus: Corpus) -> None:
    path = tmp_path / "toy.tsv"
    save_pairs(corpus.valid, path)
    assert load_pairs(path) == corpus.valid
    with pytest.raises(ValueError, match="tab"):
        save_pairs([("a\tb", "c")], path)


@pytest.mark.parametrize("content, line, message", [
    ("Go.\tVa !\nHello\n", 2, "at least 2"),
    ("Go.\tVa !\n\nHi.\t  \n", 3, "empty target"),
    ("\tVa !\n", 1, "empty source"),
])
def test_load_pairs_malformed_lines(tmp_path, content: str, line: int, message: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as err:
        load_pairs(path)
    assert f"{path}:{line}:" in str(err.value)


def test_load_pairs_bad_encoding_names_file_and_line(tmp_path) -> None:
    path = tmp_path / "latin1.tsv"
    path.write_bytes("ok\tbien\nIt's me.\tC'est moi, \xe9t\xe9.\n".encode("latin-1"))
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: not valid UTF-8")):
        load_pairs(path)


def test_load_pairs_missing_file_and_bad_columns(tmp_path) -> None:
    missing = tmp_path / "nope.tsv"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        load_pairs(missing)
    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path))):
        load_pairs(tmp_path)
    with pytest.raises(ValueError, match="distinct"):
        load_pairs(missing, src_col=1, tgt_col=1)
    path = tmp_path / "three.tsv"
    path.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(ValueError, match="at least 3"):
        load_pairs(path, tgt_col=2)


# ------------------------------------------------------------------ real text (Moses)

ROUND_TRIP_EN = [
    "I live in Paris.", "These are the students' books.", "I love rock 'n' roll.",
    'He said, "Hello!"', "It's 7:30.", "The train leaves at 8 p.m.", "It costs 10.50 euros.",
    "She earns 2,000 euros a month.", "Mr. Dupont is a doctor.", "I don't know.",
    "I've read \"The Little Prince\".", "It's a 5-minute walk.", "What's your name?",
]
ROUND_TRIP_FR = [
    "J'habite à Paris.", "Il a dit : « Bonjour ! »", "Est-ce qu'il vient ?", "Il est 7 h 30.",
    "Ça coûte 10,50 euros.", "Qu'est-ce que c'est ?", "Aidez-moi, s'il vous plaît !",
]


@pytest.mark.parametrize("lang, sentence", [("en", s) for s in ROUND_TRIP_EN]
                         + [("fr", s) for s in ROUND_TRIP_FR])
def test_moses_round_trips_real_punctuation_and_case(lang, sentence) -> None:
    codec = TextCodec(lang)
    tokens = codec.tokenize(sentence)
    assert codec.detokenize(tokens) == sentence, tokens
    assert len(tokens) > 1 and any(t[:1].isupper() for t in tokens)  # case kept


def test_moses_tokens_of_apostrophes_times_and_abbreviations() -> None:
    en, fr = TextCodec("en"), TextCodec("fr")
    assert en.tokenize("It's 7:30.") == ["It", "'s", "7:30", "."]
    assert en.tokenize("the students' books") == ["the", "students", "'", "books"]
    assert en.tokenize("at 8 p.m. today") == ["at", "8", "p.m.", "today"]
    assert fr.tokenize("J'ai l'heure.") == ["J'", "ai", "l'", "heure", "."]
    assert fr.tokenize("aujourd\u2019hui") == fr.tokenize("aujourd'hui")  # typographic '


def test_nfc_normalisation_joins_combining_accents() -> None:
    nfd = unicodedata.normalize("NFD", "Je suis fatigué.")
    assert len(nfd) == len("Je suis fatigué.") + 1  # e + a combining acute accent
    codec = TextCodec("fr")
    assert codec.tokenize(nfd) == ["Je", "suis", "fatigué", "."]
    assert normalize_text(nfd) == "Je suis fatigué."


def test_codec_lowercase_words_kind_and_round_trip_of_settings() -> None:
    assert TextCodec("fr", lowercase=True).tokenize("Je suis là.") == ["je", "suis", "là", "."]
    words = TextCodec("fr", "words")
    assert words.tokenize("J'ai un chat.") == tokenize("J'ai un chat.")
    assert words.detokenize(["j'", "ai", "un", "chat", "."]) == "j'ai un chat."
    codec = TextCodec("en", lowercase=True)
    assert TextCodec.from_dict(codec.to_dict()) == codec
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        TextCodec("en", "bpe")
    with pytest.raises(ValueError, match="language code"):
        TextCodec("english")
    with pytest.raises(ValueError, match="unknown tokenizer settings"):
        TextCodec.from_dict({"lang": "en", "casing": "kept"})
    with pytest.raises(ValueError, match="expected a dict"):
        TextCodec.from_dict(["en"])  # type: ignore[arg-type]


def test_moses_and_the_corpus_tokenizer_agree_on_the_corpus(corpus) -> None:
    fr, en = TextCodec("fr"), TextCodec("en")
    for src, tgt in corpus.train[:300] + corpus.test[:100]:
        assert fr.tokenize(src) == tokenize(src) and en.tokenize(tgt) == tokenize(tgt)
        assert en.detokenize(tokenize(tgt)) == tgt


# ------------------------------------------------------------ the formats users have

DATA = Path(__file__).parents[1] / "data"


def test_the_everyday_file_ships_inside_the_package() -> None:
    import labformer

    path = everyday_pairs_path()
    assert path.is_file() and path.name == "fr-en-everyday.tsv"
    assert path.resolve().is_relative_to(Path(labformer.__file__).resolve().parent)
    assert not (DATA / path.name).exists()  # one copy, the package's


def test_the_shipped_everyday_file_is_cased_real_text() -> None:
    pairs = read_pairs(everyday_pairs_path())
    assert len(pairs) >= 300 and pairs[0].line == 1
    assert len({s for _, s, _ in pairs}) == len(pairs)  # no duplicate source
    assert guess_language([p.src for p in pairs]) == "fr"
    assert guess_language([p.tgt for p in pairs]) == "en"
    assert sum(p.tgt[0].isupper() for p in pairs) == len(pairs)


def test_anki_fra_txt_layout_english_first_with_attribution() -> None:
    path = DATA / "anki-fra.txt"
    assert all(len(line.split("\t")) == 3 for line in path.read_text("utf-8").splitlines())
    as_is = load_pairs(path)
    assert guess_language([s for s, _ in as_is]) == "en"  # read as-is it is English -> French
    fr_en = load_pairs(path, src_col=1, tgt_col=0)
    assert fr_en[0] == ("Bonjour !", "Hello!")
    assert guess_language([s for s, _ in fr_en]) == "fr"


def test_tatoeba_pairs_export_layout() -> None:
    path = DATA / "tatoeba-fra-eng.tsv"
    with pytest.raises(ValueError, match="holds numbers, not sentences.*columns 2 and 4"):
        load_pairs(path)
    pairs = read_pairs(path, src_col=1, tgt_col=3)
    assert pairs[0] == (1, "Elle vient du Canada.", "She comes from Canada.")
    assert guess_language([p.tgt for p in pairs]) == "en"


def test_guess_language_needs_clear_evidence() -> None:
    assert guess_language(["Bonjour."]) is None  # too little text
    assert guess_language(["le chat est noir et je suis là"] * 5) == "fr"
    assert guess_language(["the cat is black and I am here"] * 5) == "en"
    assert guess_language(["le chat is the noir et I am"] * 10) is None  # mixed


# ------------------------------------------------------------ near-repeats, UTF-16 files


def test_near_repeats_are_merged_before_a_split():
    from labformer.data.pairs import PairLine, dedupe_pairs, pair_key

    nfd = unicodedata.normalize("NFD", "Où est la gare ?")
    pairs = [PairLine(1, "Où est la gare ?", "Where is the station?"),
             PairLine(2, nfd, "Where is the station?"),  # NFD accents
             PairLine(3, "OÙ EST LA GARE ?", "where is the station?"),  # case
             PairLine(4, "Où  est la gare?", "Where is the station ?"),  # spacing
             PairLine(5, "J’ai faim.", "I’m hungry."),
             PairLine(6, "J'ai faim.", "I'm hungry."),  # apostrophes
             PairLine(7, "Il a dit « oui ».", "He said “yes”."),
             PairLine(8, 'Il a dit "oui".', 'He said "yes".'),  # quotes
             PairLine(9, "J'ai soif.", "I'm thirsty.")]
    kept, merged = dedupe_pairs(pairs)
    assert [p.line for p in kept] == [1, 5, 7, 9] and merged == 5
    assert pair_key("Où est la gare ?", "x") != pair_key("Où est la banque ?", "x")


def test_a_utf16_file_is_read_as_utf16(tmp_path):
    for encoding in ("utf-16", "utf-16-be"):
        path = tmp_path / f"{encoding}.tsv"
        text = "Bonjour !\tHello!\nMerci.\tThanks.\n"
        path.write_bytes(("\ufeff" + text).encode(encoding))  # with its byte-order mark
        notes: list[str] = []
        pairs = read_pairs(path, notes=notes)
        assert [(p.src, p.tgt) for p in pairs] == [("Bonjour !", "Hello!"),
                                                  ("Merci.", "Thanks.")]
        assert "read as UTF-16" in notes[0]
    bad = tmp_path / "bad.tsv"
    bad.write_bytes(b"\xff\xfeB\x00\x00\xd8")  # a lone surrogate
    with pytest.raises(ValueError, match="not valid UTF-16"):
        read_pairs(bad)
