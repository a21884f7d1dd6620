"""The Translator: one answer per sentence, whatever its batch; eval mode whatever the model's."""

import pytest
import torch

from labformer.app.translate import Translator, build_model
from labformer.data import Vocab

WORDS = [f"w{i}" for i in range(12)]


def _translator(seed: int, dropout: float = 0.0, eos_bias: float = 0.0) -> Translator:
    vocab = Vocab(WORDS)
    model = build_model(vocab, vocab, seed=seed, d_model=32, num_heads=4, d_ff=64,
                        num_encoder_layers=1, num_decoder_layers=1, dropout=dropout, max_len=24)
    with torch.no_grad():
        model.generator.weight.mul_(3.0)  # sharper outputs: a less flat search
        model.generator.bias[vocab.eos_id] -= eos_bias
    return Translator(model, vocab, vocab)


def _sentences(seed: int) -> list[str]:
    g = torch.Generator().manual_seed(seed)
    lengths = [1, 3, 5, 2]
    return [" ".join(WORDS[int(i)] for i in torch.randint(0, 12, (n,), generator=g))
            for n in lengths]


@pytest.mark.parametrize("seed", range(20))
def test_a_sentence_translates_the_same_alone_and_in_any_batch(seed):
    # Biased against EOS, many hypotheses reach their sentence's length limit (2 n + 10).
    translator = _translator(seed, eos_bias=2.0 + seed % 3)
    sentences = _sentences(seed)
    for beam in (None, 3):
        alone = [translator.translate(s, beam=beam) for s in sentences]
        for batch in (sentences, sentences[::-1], [sentences[0], sentences[2]],
                      sentences * 2):
            out = translator.translate(batch, beam=beam)
            assert out == [alone[sentences.index(s)] for s in batch], (beam, batch)


def test_translation_is_deterministic_even_if_the_model_was_left_in_training_mode():
    # With dropout, a model in training mode gives a different output on every call; the
    # Translator must decode in eval mode, whatever mode the model was left in.
    translator = _translator(0, dropout=0.5)
    sentences = _sentences(0)
    first = translator.translate(sentences, beam=3)
    translator.model.train()
    for beam in (None, 3, None):
        assert translator.translate(sentences, beam=beam) == translator.translate(
            sentences, beam=beam)
    assert translator.translate(sentences, beam=3) == first
    assert not translator.model.training


def test_dropout_really_changes_outputs_in_training_mode():
    # The check above has teeth: the same model in training mode does not repeat itself.
    translator = _translator(0, dropout=0.5)
    src = torch.tensor([[4, 5, 6, 7, 2]])
    tgt = torch.tensor([[1, 4, 5, 6]])
    translator.model.train()
    assert not torch.equal(translator.model(src, tgt), translator.model(src, tgt))


def test_build_model_is_seeded_without_reseeding_the_caller():
    vocab = Vocab(WORDS)
    torch.manual_seed(7)
    before = torch.get_rng_state()
    a = build_model(vocab, vocab, seed=3, d_model=32, num_heads=4, d_ff=64)
    assert torch.equal(torch.get_rng_state(), before)
    b = build_model(vocab, vocab, seed=3, d_model=32, num_heads=4, d_ff=64)
    c = build_model(vocab, vocab, seed=4, d_model=32, num_heads=4, d_ff=64)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.generator.weight, c.generator.weight)
