"""Numbers, clock times, unknown words, case and final punctuation carried over
(labformer.app.carry), on hand-made vocabularies: no model is needed to check the placeholders."""

from __future__ import annotations

import math

import pytest

from labformer.app.carry import (
    Carried,
    Carry,
    Confidence,
    FlagCounts,
    NumberGroup,
    count_flags,
    translate_carried,
)
from labformer.app.translate import Translation
from labformer.data import TextCodec, Vocab

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


# ------------------------------------- clock halves, signs, phone numbers, ordinals, names

SRC2 = ("Le magasin ouvre à h . Il est du matin soir de l' après-midi et ferme fait degrés "
        "Mon numéro le 06 12 34 56 78 Notre bureau au 3e étage C' mon ami Paul Marc Où ? 10 "
        "50 8 30 Nous sommes juillet 1990 14 Je suis fatigué J' ai faim blanche robe").split()
TGT2 = ("The shop opens at a.m. p.m. 10 8 It 's 10:50 8:30 and closes degrees My number is "
        "06 12 34 56 78 Our office on the 3rd floor This my friend Paul Marc Where ? Today "
        "July 14 1990 , I 'm tired hungry white dress .").split()


@pytest.fixture(scope="module")
def carry2() -> Carry:
    return Carry(Vocab(SRC2), Vocab(TGT2), TextCodec("fr"), TextCodec("en"))


@pytest.mark.parametrize("source, output, expected", [
    # the half of the day comes from the source's 24-hour clock, not from the model
    ("Le magasin ouvre à 12 h.", "The shop opens at 10 a.m.", "The shop opens at 12 p.m."),
    ("Le magasin ouvre à 0 h.", "The shop opens at 10 p.m.", "The shop opens at 12 a.m."),
    ("Il est 4 h 10 du matin.", "It's 8:30 p.m.", "It's 4:10 a.m."),
    ("Il est 10 h 50.", "It's 10:50 p.m.", "It's 10:50 a.m."),
    ("Il est 4 h de l'après-midi.", "It's 8 a.m.", "It's 4 p.m."),
    ("Il est 9 h du soir.", "It's 10:50.", "It's 9 p.m."),  # a half named: a mark
    ("Le magasin ouvre à 10 h et ferme à 18 h.",
     "The shop opens at 10 p.m. and closes at 8 p.m.",
     "The shop opens at 10 a.m. and closes at 6 p.m."),
    ("Il est 21 h 05.", "It's 8:30.", "It's 21:05."),  # no mark anywhere: the 24-hour clock
    # a minus sign, typographic or not, is kept
    ("Il fait −3 degrés.", "It's 8 degrees.", "It's −3 degrees."),
    ("Il fait -5 degrés.", "It's 8 degrees.", "It's -5 degrees."),
    # digit groups with a leading zero are a phone number: kept as written
    ("Mon numéro est le 01 234 567.", "My number is 06 12 34.", "My number is 01 234 567."),
    ("Mon numéro est le 06 12 34 56 78.", "My number is 06 12 34 56 78.",
     "My number is 06 12 34 56 78."),
    # ordinals in English form
    ("Notre bureau est au 2e étage.", "Our office is on the 3rd floor.",
     "Our office is on the 2nd floor."),
    ("Notre bureau est au 1er étage.", "Our office is on the 3rd floor.",
     "Our office is on the 1st floor."),
    ("Notre bureau est au 11e étage.", "Our office is on the 3rd floor.",
     "Our office is on the 11th floor."),
    # a date's numbers in their order
    ("Nous sommes le 14 juillet 1789.", "Today is July 14, 1990.",
     "Today is July 14, 1789."),
    # a name the model knows, swapped for another by the model, is put back
    ("C'est mon ami Paul.", "This is my friend Marc.", "This is my friend Paul."),
])
def test_clock_sign_phone_ordinal_date_and_name(carry2, source, output, expected):
    carried = carry2.restore(carry2.prepare(source), output)
    assert carried.text == expected and carried.lost == ()


def test_the_model_reads_a_known_ordinal_and_number(carry2):
    assert carry2.prepare("Notre bureau est au 2e étage.").text == \
        "Notre bureau est au 3e étage."
    assert carry2.prepare("Il fait −3 degrés.").text == "Il fait 8 degrés."


def test_what_cannot_be_put_back_is_named(carry2):
    p = carry2.prepare("Notre bureau est au 2e étage.")
    assert carry2.restore(p, "Our office is on the floor.").lost == ("2nd",)
    p = carry2.prepare("Nous sommes le 03/04/2025.")
    assert p.numbers[0].text == "03/04/2025" and "day/month/year" in p.notes[0]
    carried = carry2.restore(p, "Today is July 14.")
    assert "03/04/2025" in carried.text and carried.notes == tuple(p.notes)
    # a known name the model dropped, with no other name in its place
    assert carry2.restore(carry2.prepare("C'est mon ami Paul."), "This is my friend.").lost \
        == ("Paul",)


def test_a_capital_inside_a_sentence_is_a_name(carry2):
    p = carry2.prepare("C'est mon ami Blanche.")  # "blanche" is a known word: white
    assert "blanche" not in p.text.split() and list(p.names.values()) == ["Blanche"]
    assert carry2.known_case("Blanche", first=True) == "blanche"  # first word: a word


def test_sentences_are_split_but_not_after_a_title():
    from labformer.app.carry import split_sentences

    assert split_sentences("Je suis fatigué. J'ai faim.") == ["Je suis fatigué.", "J'ai faim."]
    assert split_sentences("Où est Tom ? Il dort !") == ["Où est Tom ?", "Il dort !"]
    assert split_sentences("M. Dupont est là. Mme Martin aussi.") == [
        "M. Dupont est là.", "Mme Martin aussi."]
    assert split_sentences("Il a dit : « Bonjour ! » Puis il est parti.") == [
        "Il a dit : « Bonjour ! »", "Puis il est parti."]
    assert split_sentences("Il est 7 h 30.") == ["Il est 7 h 30."]


def test_every_sentence_of_a_line_is_translated(carry2):
    english = {"Je suis fatigué.": "I'm tired.", "J'ai faim.": "I'm hungry."}

    class Stub:  # translates each known sentence, and drops the rest of a longer line
        src_vocab, tgt_vocab = carry2.src_vocab, carry2.tgt_vocab
        src_text, tgt_text = carry2.src_text, carry2.tgt_text

        def translate_detailed(self, sources, beam=None):
            return [Translation(s, english.get(s, "I'm tired.")) for s in sources]

    (line,) = translate_carried(Stub(), ["Je suis fatigué. J'ai faim."], carry=carry2)  # type: ignore[arg-type]
    assert line.text == "I'm tired. I'm hungry." and len(line.parts) == 2
    (whole,) = translate_carried(Stub(), ["Je suis fatigué. J'ai faim."], carry=carry2,  # type: ignore[arg-type]
                                 split=False)
    assert whole.text == "I'm tired."  # what a model given the whole line did


def test_english_ordinals():
    from labformer.app.carry import english_ordinal

    assert [english_ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


def test_flags_are_counted_on_wrong_and_right_translations(monkeypatch, carry):
    """count_flags: a translation is right when it is the reference word for word; the shares
    and the lift come from the four counts."""
    import labformer.app.carry as carry_module

    outputs = ["The cat sleeps .", "A dog .", "The man eats .", "Nothing ."]
    flags = [False, True, True, False]  # right unflagged, wrong flagged, right flagged, wrong
    monkeypatch.setattr(carry_module, "translate_carried", lambda t, sources, beam=None: [
        Carried(s, o) for s, o in zip(sources, outputs, strict=True)])
    monkeypatch.setattr(carry_module, "assess", lambda t, carried: [
        Confidence(-0.1, ("unsure",) if f else ()) for f in flags])

    class Model:
        tgt_text = carry.tgt_text

    pairs = [("a", "The cat sleeps ."), ("b", "The dog ."), ("c", "The man eats ."),
             ("d", "The woman .")]
    counts = count_flags(Model(), pairs)  # type: ignore[arg-type]
    assert counts == FlagCounts(pairs=4, wrong=2, wrong_flagged=1, right_flagged=1)
    assert (counts.caught, counts.spared, counts.flagged, counts.right) == (0.5, 0.5, 2, 2)
    assert counts.lift == pytest.approx(0.5 - 0.5)
    both = counts + FlagCounts(pairs=2, wrong=2, wrong_flagged=2, right_flagged=0)
    assert both == FlagCounts(6, 4, 3, 1) and both.lift == pytest.approx(3 / 4 - 1 / 2)
    assert math.isnan(FlagCounts(3, 0, 0, 0).caught) and math.isnan(FlagCounts(3, 3, 3, 0).lift)
    with pytest.raises(ValueError, match="at least one"):
        count_flags(Model(), [])  # type: ignore[arg-type]


# ------------------------------------------------- a word the model copies, left out of the output

LYON_SRC = "et visitent lyon paris table .".split()  # the generated corpus's words: lower case
LYON_TGT = "and visit lyon paris table .".split()


@pytest.fixture(scope="module")
def lyon() -> Carry:
    return Carry(Vocab(LYON_SRC), Vocab(LYON_TGT), TextCodec("fr", "words"),
                 TextCodec("en", "words"))


def test_a_known_name_the_output_lacks_is_not_carried_over(lyon):
    """'Pierre et Marie visitent Lyon.' -> 'et pierre visit et marie.': lyon, a word the model
    writes as it reads it, is gone; named with what could not be carried over. Present in the
    output, in any case, it is not named."""
    p = lyon.prepare("Pierre et Marie visitent Lyon.")
    assert p.names == {"paris": "pierre", "table": "marie"} and p.copied == [("lyon", "lyon")]
    carried = lyon.restore(p, "et paris visit et table.")
    assert carried.text == "et pierre visit et marie." and carried.lost == ("lyon",)
    assert lyon.restore(p, "paris and table visit lyon.").lost == ()
    cased = Carry(Vocab(["Lyon", "est", "belle", "."]), Vocab(["Lyon", "is", "beautiful", "."]),
                  TextCodec("fr"), TextCodec("en"))
    first = cased.prepare("Lyon est belle.")  # the first word: not a "kept" name
    assert first.kept == [] and first.copied == [("Lyon", "Lyon")]
    assert cased.restore(first, "It is beautiful.").lost == ("Lyon",)
    assert cased.restore(first, "LYON is beautiful.").lost == ()


class _LyonModel:
    """A translator that drops lyon (and copies the placeholders), for assess and the CLI."""

    src_vocab, tgt_vocab = Vocab(LYON_SRC), Vocab(LYON_TGT)
    src_text, tgt_text = TextCodec("fr", "words"), TextCodec("en", "words")
    max_source_tokens = 40

    def translate_detailed(self, sources, beam=None):
        return [Translation(s, "et paris visit et table.") for s in sources]


def test_assess_flags_a_dropped_name_and_the_command_line_prints_it(monkeypatch, capsys, lyon):
    import argparse

    import labformer.app.carry as carry_module
    from labformer.app.carry import assess
    from labformer.app.cli.translate import _translate_lines

    monkeypatch.setattr(carry_module, "token_scores", lambda t, sources, outputs: [
        [-0.01] * 4 for _ in sources])  # the model sure of itself: only the lost word flags it
    model = _LyonModel()
    (carried,) = translate_carried(model, ["Pierre et Marie visitent Lyon."], carry=lyon)  # type: ignore[arg-type]
    (verdict,) = assess(model, [carried])  # type: ignore[arg-type]
    assert verdict.flagged and verdict.reasons == ("not carried over: lyon",)
    args = argparse.Namespace(scores=True, beam=None, max_length=None)
    assert _translate_lines(model, lyon, ["Pierre et Marie visitent Lyon."], 1, args,  # type: ignore[arg-type]
                            "sentence") == 0
    out, err = capsys.readouterr()
    assert out.endswith("\tet pierre visit et marie.\n"), out
    assert "sentence 1: not carried over to the translation: lyon" in err, err
    assert "sentence 1 is likely wrong: not carried over: lyon" in err, err
