"""Numbers, clock times, unknown words, case and final punctuation carried over
(labformer.carry), on hand-made vocabularies: no model is needed to check the placeholders."""

from __future__ import annotations

import pytest

from labformer.carry import Carried, Carry, NumberGroup, translate_carried
from labformer.data import TextCodec, Vocab
from labformer.translate import Translation

SRC = ["Il", "est", "h", ".", "Le", "billet", "coûte", "euros", "Je", "je", "suis", "là",
       "m'", "appelle", "Tom", "Ça", "Elle", "gagne", "par", "mois", "7", "30", "9", "15",
       "12", "10,50", "2", "000", "8", "17", "le", "chat", "dort"]
TGT = ["It", "'s", ".", "The", "ticket", "costs", "euros", "I", "am", "here", "My", "name",
       "is", "Tom", "She", "earns", "a", "month", "7:30", "9:15", "12", "10.50",
       "2,000", "a.m.", "p.m.", "8", "5", "the", "cat", "sleeps"]


@pytest.fixture(scope="module")
def carry() -> Carry:
    return Carry(Vocab(SRC), Vocab(TGT), TextCodec("fr"), TextCodec("en"))


def test_unknown_numbers_become_known_ones_of_the_same_shape(carry):
    p = carry.prepare("Il est 10 h 45.")
    assert p.text == "Il est 9 h 15."  # the nearest clock time the model has written
    assert p.numbers == [NumberGroup("time", hour=10, minute=45)]
    p = carry.prepare("Le billet coûte 7,25 euros.")
    assert p.text == "Le billet coûte 10,50 euros." and p.numbers[0].text == "7.25"
    assert carry.prepare("Le billet coûte 12 euros.").text == "Le billet coûte 12 euros."
    p = carry.prepare("Elle gagne 3 500 euros par mois.")
    assert p.numbers == [NumberGroup("number", text="3,500")]


@pytest.mark.parametrize("source, output, expected", [
    ("Il est 10 h 15.", "It's 9:15.", "It's 10:15."),
    ("Il est 10 h 15.", "It's 7:30.", "It's 10:15."),
    ("Le billet coûte 7,25 euros.", "The ticket costs 10.50 euros.",
     "The ticket costs 7.25 euros."),
    ("Le billet coûte 13 euros.", "The ticket costs 12 euros.", "The ticket costs 13 euros."),
    ("Elle gagne 3 500 euros par mois.", "She earns 2,000 euros a month.",
     "She earns 3,500 euros a month."),
    # a 24-hour time on the 12-hour clock where the model writes a.m./p.m.
    ("Il est de 8 h à 18 h.", "It's 8 a.m. to 5 p.m.", "It's 8 a.m. to 6 p.m."),
    ("Il est 14 h 30.", "It's 2:30 p.m.", "It's 2:30 p.m."),
    ("Il est 21 h 05.", "It's 9:15.", "It's 21:05."),
])
def test_numbers_are_put_back_in_order_and_in_english(carry, source, output, expected):
    assert carry.restore(carry.prepare(source), output).text == expected


def test_a_number_the_model_did_not_write_is_reported(carry):
    carried = carry.restore(carry.prepare("Il est 10 h 15."), "It's here.")
    assert carried.text == "It's here." and carried.lost == ("10:15",)


def test_case_is_matched_to_the_vocabulary(carry):
    texts = {carry.prepare(s).text for s in ("je suis là.", "Je suis là.", "JE SUIS LÀ.")}
    assert texts == {"Je suis là."}
    assert carry.known_case("JE", first=True) == "Je"
    assert carry.known_case("je") == "je"  # known as written, not first: kept
    assert carry.known_case("SUIS", shouting=True) == "suis"


def test_unknown_words_are_copied_through_a_name(carry):
    p = carry.prepare("Je m'appelle Zorglub.")
    assert p.text == "Je m'appelle Tom." and p.names == {"Tom": "Zorglub"}
    assert carry.restore(p, "My name is Tom.").text == "My name is Zorglub."
    assert carry.restore(p, "My name is.").lost == ("Zorglub",)


def test_missing_final_punctuation_is_added_and_taken_away(carry):
    p = carry.prepare("le chat dort")  # training sentences start with a capital, too
    assert p.text == "Le chat dort." and p.added_stop == "."
    assert carry.restore(p, "the cat sleeps.").text == "the cat sleeps"
    assert carry.prepare("le chat dort.").added_stop is None


def test_disabled_and_cropped(carry):
    off = Carry(carry.src_vocab, carry.tgt_vocab, carry.src_text, carry.tgt_text,
                enabled=False)
    p = off.prepare("Il est 10 h 15")
    assert p.text == "Il est 10 h 15" and off.restore(p, "x").text == "x"
    cropped = Carry(carry.src_vocab, carry.tgt_vocab, carry.src_text, carry.tgt_text,
                    enabled=False, crop=3)
    assert cropped.prepare("Il est 10 h 15.").text == "Il est 10"


def test_translate_carried_tries_another_name_when_one_is_dropped(carry):
    seen: list[str] = []

    class Stub:  # drops the first placeholder, copies the second
        src_vocab, tgt_vocab = carry.src_vocab, carry.tgt_vocab
        src_text, tgt_text = carry.src_text, carry.tgt_text

        def translate_detailed(self, sources, beam=None):
            seen.extend(sources)
            return [Translation(s, "My name is." if "Tom" in s else "My name is Marie.")
                    for s in sources]

    wide = Carry(Vocab([*SRC, "Marie"]), Vocab([*TGT, "Marie"]), carry.src_text,
                 carry.tgt_text)
    (out,) = translate_carried(Stub(), ["Je m'appelle Zorglub."], carry=wide)  # type: ignore[arg-type]
    assert isinstance(out, Carried)
    assert seen == ["Je m'appelle Tom.", "Je m'appelle Marie."]
    assert out.text == "My name is Zorglub." and out.lost == ()
