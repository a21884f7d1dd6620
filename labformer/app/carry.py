"""What the model never saw, carried over: numbers, clock times, unknown words, case, punctuation.

A translator trained on a few hundred pairs knows a few numbers and names. Given a number it
never saw it reads UNK and writes one it did ("Il est 10 h 15." -> "It's 8:10."), and given a
name it invents another. This module puts placeholders around the model, in three steps:

1. :meth:`Carry.prepare` reads the source as the model's tokenizer does and rewrites it into
   words the model knows. A word unknown in its case is looked up lower-cased and
   capitalised (``je``, ``Je`` and ``JE`` all become the vocabulary's ``Je``). Each number
   the vocabulary lacks becomes the nearest known number of the same shape (``12`` ->
   ``10``, ``7,25`` -> ``10,50``), so that the model writes a number where the source has
   one. Each other unknown word becomes a name the model copies unchanged (a token that is
   the same in both vocabularies, ``Paris``, say). A sentence without final punctuation gets
   a full stop, as every training sentence had one.
2. The model translates the rewritten source.
3. :meth:`Carry.restore` puts the source's numbers back, in order and in the target's
   format (``10 h 15`` -> ``10:15``; ``17 h`` -> ``5 p.m.`` where the model wrote a.m./p.m.;
   ``7,25`` -> ``7.25``; ``2 000`` -> ``2,000``), replaces each placeholder name by the word
   it stands for, and takes the added full stop away again.

Numbers are matched by order within their kind (clock times, other numbers): French and
English write the numbers of a sentence in the same order. What cannot be put back (the
model wrote fewer numbers than the source has, or dropped a placeholder, or left out a word
it copies, a name it knows such as ``Lyon``) is listed in :attr:`Carried.lost`.

The book's live translator page (``book/_static/labformer-live.js``) does all of this in the
browser, each piece under the name of the function here it mirrors; :meth:`Carry.tables` is
what it reads from the model file, and ``tests/cli/test_live.py`` checks that both give the same
translations and warnings.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from labformer.data import TextCodec, Vocab

if TYPE_CHECKING:
    from labformer.app.translate import Translator

__all__ = ["LOW_SCORE", "LOW_TOKEN", "Carried", "Carry", "Confidence", "FlagCounts",
           "NumberGroup", "Prepared", "assess", "count_flags", "english_ordinal", "has_word",
           "sentence_scores", "split_sentences", "token_scores", "translate_carried"]

_INT = re.compile(r"\d+")
_DECIMAL = re.compile(r"\d+[.,]\d+")
_THOUSANDS = re.compile(r"\d{3}")
_THOUSANDS_DECIMAL = re.compile(r"\d{3}[.,]\d+")  # the last group of "1 234,56"
_GLUED_TIME = re.compile(r"(\d{1,2})h(\d{2})?")  # French "14h30", "7h30", "9h"
_GROUP = re.compile(r"\d{2,4}")  # a group of a phone number: "06 12 34 56 78", "01 234 567"
_ORDINAL = re.compile(r"(\d+)(?:er|re|ère|e|ème|eme|è|nd|nde)")  # 1er, 2e, 3ème, 2nd
_DATE = re.compile(r"\d{1,2}/\d{1,2}/\d{2,4}")  # 03/04/2025: day/month/year in French
_MINUS = ("-", "\u2212", "\u2013")  # hyphen-minus, minus sign, en dash
_HOUR_MARKS = ("h", "h.")  # French "10 h 15"; Moses keeps "h." at the end
# What follows a French clock time to say which half of the day it is in.
_PERIODS = {("du", "matin"): "a.m.", ("de", "la", "nuit"): "a.m.",
            ("de", "l'", "après-midi"): "p.m.", ("du", "soir"): "p.m."}
_STOPS = frozenset(".?!…")
# English output: a clock time, an amount with thousands commas, a plain or decimal number;
# a hyphenated tail ("5-minute") is kept.
_OUT_TIME = re.compile(r"(\d{1,2}):(\d{2})")
_OUT_NUMBER = re.compile(r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(-\w+)?")
_OUT_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th)")
_MERIDIEM = ("a.m.", "p.m.")
RETRIES = 2  # other placeholder names tried when the model drops one
# Sentence ends: . ! ? … (a closing quote may follow), then space and a capital.
_SENTENCE_END = re.compile(r"[.!?…]+(?:\s*[»\"”)\]])?(?=\s+[«\"“(\[]?\s*[^\W\d_])")
# Words a full stop follows without ending the sentence (titles, abbreviations).
_ABBREVIATIONS = frozenset("M Mme Mlle Mmes MM Dr Pr St Ste Mr Mrs Ms etc cf p ex env "
                           "av apr J.-C n°".split())


def english_ordinal(n: int) -> str:
    """1 -> 1st, 2 -> 2nd, 3 -> 3rd, 11 -> 11th, 21 -> 21st."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def split_sentences(text: str) -> list[str]:
    """The sentences of a line: split after . ! ? or … followed by a capital, not after a
    title or abbreviation (M., Mme, Dr, etc.). A line of one sentence is returned whole."""
    pieces, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        before = text[start:m.start()].split()
        word = before[-1] if before else ""
        if m.group().startswith(".") and (word in _ABBREVIATIONS or (
                len(word) == 1 and word.isupper())):
            continue
        pieces.append(text[start:m.end()].strip())
        start = m.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def has_word(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit (a line of punctuation does not)."""
    return any(c.isalnum() for c in text)


@dataclass(frozen=True)
class NumberGroup:
    """A number of the source, as the target should write it.

    ``kind``: "time" (``hour`` and ``minute``, minute None for "21 h"; ``text`` the a.m./p.m.
    the source asks for with "du matin", "du soir", "de l'après-midi", or ""), "number",
    "ordinal" or "date" (``text``, already in the target's format: decimal point, thousands
    commas, sign, 2nd; a phone number's digit groups as written). ``width``: how many
    number tokens the model may write for it (the groups of a phone number).
    """

    kind: str
    text: str = ""
    hour: int = 0
    minute: int | None = None
    width: int = 1
    sign: str = ""  # a minus before a clock time ("-7 h 30"): kept, written before it

    def clock(self, meridiem: str | None) -> tuple[str, str | None]:
        """The time as text, and the a.m./p.m. mark to write after it (or None).

        ``meridiem`` is the mark the model wrote, if any. The mark written is the source's:
        "du matin" a.m., "de l'après-midi" and "du soir" p.m.; without them the hour is read
        on the 24-hour clock (0 h midnight, 1 to 11 h a.m., 12 h noon, 13 to 23 h p.m.). A
        mark is written where the model wrote one or the source says which half of the day;
        otherwise the time stays on the 24-hour clock ("21 h 05" -> "21:05").
        """
        hour, period, sign = self.hour, self.text or None, self.sign
        if meridiem is None and period is None:
            return sign + (f"{hour}:00" if self.minute is None
                           else f"{hour}:{self.minute:02d}"), None
        if period is None:
            period = "a.m." if hour % 24 < 12 else "p.m."
        elif period == "p.m." and hour < 12:
            hour += 12  # "4 h de l'après-midi": 16 h
        hour = hour % 12 or 12
        return sign + (f"{hour}" if self.minute is None else f"{hour}:{self.minute:02d}"), period


@dataclass
class Prepared:
    """A source rewritten for the model, and what to put back into its translation."""

    source: str  # as given
    text: str  # as the model reads it
    numbers: list[NumberGroup] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # placeholder -> source word
    unknown: list[str] = field(default_factory=list)  # left as UNK (no placeholder)
    added_stop: str | None = None  # final punctuation added to the source
    kept: list[str] = field(default_factory=list)  # names of the source the output must hold
    # (source word, as the model reads it) for each word the model copies (a name it knows,
    # "Lyon"; a word spelt alike in both languages): the output must hold it
    copied: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the reader should check


@dataclass(frozen=True)
class Carried:
    """A translation with the source's numbers and unknown words put back."""

    source: str
    text: str
    unknown: tuple[str, ...] = ()  # source words the model read as UNK
    lost: tuple[str, ...] = ()  # numbers or words that could not be put back
    prepared: str = ""  # the source as the model read it
    raw: str = ""  # the model's output, before anything was put back
    notes: tuple[str, ...] = ()  # carried over, but worth a look (a date's order)
    # (prepared, raw) of each sentence, for a line of several sentences translated one by one
    parts: tuple[tuple[str, str], ...] = ()
    names: tuple[str, ...] = ()  # unknown words carried over through a placeholder


def _number_value(token: str) -> float:
    return float(token.replace(",", "."))


def _shape(token: str) -> tuple[int, int] | None:
    """What a placeholder must share with a number token, else None: (digits of a leading
    zero's number, 0 otherwise, as in "05"; digits after the decimal mark)."""
    if _INT.fullmatch(token):
        return (len(token) if token[0] == "0" and len(token) > 1 else 0), 0
    if _DECIMAL.fullmatch(token):
        before, after = re.split(r"[.,]", token)
        return (len(before) if before[0] == "0" and len(before) > 1 else 0), len(after)
    return None


class Carry:
    """Placeholders around one translator's vocabularies (see the module's docstring)."""

    def __init__(self, src_vocab: Vocab, tgt_vocab: Vocab, src_text: TextCodec,
                 tgt_text: TextCodec, enabled: bool = True, crop: int | None = None) -> None:
        """``enabled=False``: sources and outputs pass unchanged (but for ``crop``: keep
        the first ``crop`` tokens of a longer source)."""
        self.enabled, self.crop = enabled, crop
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.src_text, self.tgt_text = src_text, tgt_text
        words = src_vocab.itos[len(Vocab(()).itos):]
        self.numbers = [t for t in words if _shape(t) is not None]
        # Words the model writes as it reads them: names, mostly. Capitalised ones first,
        # frequent ones first among them (the model has learned to copy those).
        same = [t for t in words if t in tgt_vocab and t.isalpha() and len(t) > 2]
        self.names = sorted(same, key=lambda t: not t[:1].isupper())
        # Clock times the model has written whose hour and minutes it reads: "10 h 50"
        # -> "10:50" was (most likely) a training pair. A time it lacks is read as the
        # nearest of these, a phrase it knows.
        self.clocks = sorted(
            (int(m.group(1)), m.group(2)) for m in map(_OUT_TIME.fullmatch, tgt_vocab.itos)
            if m and m.group(1) in src_vocab and m.group(2) in src_vocab)
        self.decimal_comma = src_text.lang == "fr" or any("," in t for t in self.numbers)
        self.ordinals = [(int(m.group(1)), t) for t in words if (m := _ORDINAL.fullmatch(t))]
        self.name_set = frozenset(n for n in self.names if n[:1].isupper())
        self.copyable = frozenset(self.names)

    def tables(self) -> dict[str, object]:
        """What this class reads off the vocabularies, as JSON-able data: the live page's copy
        (``labformer.app.export`` writes it into the model file; the page computes nothing of
        it)."""
        return {"numbers": list(self.numbers), "names": list(self.names),
                "clocks": [[hour, minute] for hour, minute in self.clocks],
                "decimal_comma": self.decimal_comma,
                "ordinals": [[value, token] for value, token in self.ordinals],
                "name_set": sorted(self.name_set)}

    @classmethod
    def of(cls, translator: Translator, enabled: bool = True, crop: int | None = None
           ) -> Carry:
        """The placeholders for ``translator``'s vocabularies and codecs."""
        return cls(translator.src_vocab, translator.tgt_vocab, translator.src_text,
                   translator.tgt_text, enabled, crop)

    # ------------------------------------------------------------------ source side

    def known_case(self, token: str, first: bool = False, shouting: bool = False) -> str:
        """The vocabulary's spelling of ``token``: as written, else lower-case or Capitalised.

        Training sentences start with a capital, so a ``first`` word in lower or upper case
        is looked up Capitalised first (``je`` and ``JE`` -> ``Je``); in a ``shouting``
        (all upper-case) sentence every word is looked up in lower case first.
        """
        variants = [token, token.lower(), token.capitalize(), token.title()]
        if first and (token.islower() or token.isupper()):
            variants = [token.capitalize(), *variants]
        elif shouting:
            variants = [token.lower(), token.capitalize(), token]
        return next((v for v in variants if v in self.src_vocab), token)

    def nearest_number(self, token: str, below: float = float("inf")) -> str | None:
        """The known number of the same shape closest in value to ``token`` (None: none),
        less than ``below`` if one is (an hour below 25, minutes below 60)."""
        shape = _shape(token)
        numbers = [t for t in self.numbers if _number_value(t) < below] or self.numbers
        same = [t for t in numbers if _shape(t) == shape]
        if not same:  # another shape of the same kind: an integer for an integer
            same = [t for t in numbers if (_shape(t) or (0, 0))[1] == (shape or (0, 0))[1]]
        if not same:
            return None
        value = _number_value(token)
        return min(same, key=lambda t: (abs(_number_value(t) - value), t))

    def _format(self, tokens: Sequence[str]) -> str:
        """A number of the source in the target's form: 7,25 -> 7.25, 2 000 -> 2,000."""
        if len(tokens) > 1:  # thousands groups, perhaps with decimals: "1 234,56"
            joined = "".join(tokens)
            decimal = re.search(r"[.,]", tokens[-1])
            if decimal is None:
                return f"{int(joined):,}"
            digits, decimals = re.split(r"[.,]", joined)
            mark = "." if self.tgt_text.lang == "en" else decimal.group()
            return f"{int(digits):,}{mark}{decimals}"
        token = tokens[0]
        if self.decimal_comma and self.tgt_text.lang == "en" and "," in token:
            return token.replace(",", ".")
        return token

    def prepare(self, sentence: str, skip: int = 0) -> Prepared:
        """The source as the model should read it, with what to put back afterwards.

        ``skip``: leave out the first ``skip`` placeholder names (a second try, when the
        model dropped the first one).
        """
        tokens = self.src_text.tokenize(sentence)
        prepared = Prepared(sentence, sentence)
        if self.crop is not None and len(tokens) > self.crop:
            tokens = tokens[:self.crop]
            prepared.text = self._join(tokens, sentence)
        if not self.enabled:
            return prepared
        out: list[str] = []
        taken = set(tokens)
        names = iter([n for n in self.names if n not in taken][skip:])
        letters = [t for t in tokens if any(c.isalpha() for c in t)]
        shouting = len(letters) > 1 and all(t.isupper() for t in letters)
        copies: dict[str, str] = {}  # source word -> its placeholder
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if all(unicodedata.category(c) == "Cf" for c in token):
                # an invisible mark (zero-width, right-to-left): not for the model, but named
                codes = " ".join(f"U+{ord(c):04X}" for c in token)
                prepared.notes.append(f"left out an invisible character ({codes})")
                i += 1
                continue
            taken_here = self._number(tokens, i, prepared, out)
            if taken_here:
                i += taken_here
                continue
            # A sentence starts here: after nothing, a full stop, an opening quote, a colon.
            first = i == 0 or tokens[i - 1] in ("«", '"', ":", ".", "!", "?", "…", "(")
            word = self.known_case(token, first=first, shouting=shouting)
            if not first and not shouting and token[:1].isupper() and token not in \
                    self.src_vocab and any(c.isalpha() for c in token):
                word = token  # a capital inside a sentence: a name (Blanche), not "blanche"
            if word in self.src_vocab and not first and not shouting \
                    and token[:1].isupper() and token.isalpha() and token in self.tgt_vocab:
                prepared.kept.append(token)  # a name the model knows: it must come back
            if word in self.copyable:
                prepared.copied.append((token, word))  # a word the model writes as it reads
            if word not in self.src_vocab and any(c.isalnum() for c in word):
                if token not in copies:
                    placeholder = next(names, None)
                    if placeholder is not None:
                        copies[token] = placeholder
                        prepared.names[placeholder] = token.lower() if shouting else token
                if token in copies:
                    word = copies[token]
                else:
                    prepared.unknown.append(token)
            elif word not in self.src_vocab:
                prepared.unknown.append(token)  # a symbol it does not know (€, an emoji)
            out.append(word)
            i += 1
        room = self.crop is None or len(out) < self.crop
        if room and out and not any(c in _STOPS for c in out[-1]) and out[-1] not in ("»", '"'):
            stop = "." if "." in self.src_vocab else None
            if stop is not None:
                out.append(stop)
                prepared.added_stop = stop
        if out != tokens:
            prepared.text = self._join(out, sentence)
        return prepared

    def _number(self, tokens: list[str], i: int, prepared: Prepared, out: list[str]) -> int:
        """Read the number that starts at ``tokens[i]``, if any: append what the model should
        read to ``out`` and what to put back to ``prepared``; the tokens it took (0: none)."""
        token = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token[:1] in _MINUS and len(token) > 1 and _shape(token[1:]) is not None:
            return self._signed(token[0], [token[1:], *tokens[i + 1:]], prepared, out)
        if token in _MINUS and _shape(nxt) is not None and (
                i == 0 or _shape(tokens[i - 1]) is None):  # a sign, not "5 - 3"
            return 1 + self._signed(token, tokens[i + 1:], prepared, out)
        date = "".join(tokens[i:i + 5])
        if _DATE.fullmatch(token) or (tokens[i + 1:i + 5:2] == ["/", "/"]
                                      and _DATE.fullmatch(date)):
            text = token if _DATE.fullmatch(token) else date
            prepared.numbers.append(NumberGroup("date", text=text))
            prepared.notes.append(f"the date {text} is written as in French, day/month/year "
                                  f"(in the US it reads month/day)")
            day = text.split("/")[0]
            out.append(day if day in self.src_vocab else self.nearest_number(day) or day)
            return 1 if text == token else 5
        ordinal = _ORDINAL.fullmatch(token)
        if ordinal and self.tgt_text.lang == "en":
            value = int(ordinal.group(1))
            prepared.numbers.append(NumberGroup("ordinal", text=english_ordinal(value)))
            closest = min(self.ordinals, key=lambda o: (abs(o[0] - value), o), default=None)
            out.append(token if token in self.src_vocab or closest is None else closest[1])
            return 1
        glued = _GLUED_TIME.fullmatch(token)
        if glued and int(glued.group(1)) <= 24 and (
                glued.group(2) is None or int(glued.group(2)) < 60):
            # "14h30" is "14 h 30": the model reads it spaced, as it learned it
            spaced = [glued.group(1), "h", *([glued.group(2)] if glued.group(2) else [])]
            return self._time([*spaced, *tokens[i + 1:]], 0, prepared, out) - len(spaced) + 1
        if _shape(token) is None:
            return 0
        j = i + 1  # "2 000 000": one number, written 2,000,000
        phone = token[0] == "0" and len(token) > 1 and _INT.fullmatch(token) is not None
        if phone:  # "06 12 34 56 78", "01 234 567": digit groups, kept as written
            while j < len(tokens) and _GROUP.fullmatch(tokens[j]):
                j += 1
        elif _INT.fullmatch(token) and len(token) <= 3:
            while j < len(tokens) and _THOUSANDS.fullmatch(tokens[j]):
                j += 1
            if j < len(tokens) and _THOUSANDS_DECIMAL.fullmatch(tokens[j]):
                j += 1  # "1 234,56": its decimals end it
        group = tokens[i:j]
        after = tokens[j] if j < len(tokens) else ""
        is_time = (len(group) == 1 and _INT.fullmatch(token) is not None
                   and int(token) <= 24 and after in _HOUR_MARKS)
        if is_time:
            return self._time(tokens, i, prepared, out)
        if phone and len(group) > 1:
            prepared.numbers.append(NumberGroup("number", text=" ".join(group),
                                                width=len(group)))
            for t in group:
                out.append(t if t in self.src_vocab else self.nearest_number(t) or t)
            return len(group)
        prepared.numbers.append(NumberGroup("number", text=self._format(group)))
        if all(t in self.src_vocab for t in group):
            out.extend(group)
        else:
            near = self.nearest_number(group[0] if len(group) == 1 else "".join(group))
            out.append(near or group[0])
        return len(group)

    def _signed(self, sign: str, tokens: list[str], prepared: Prepared, out: list[str]) -> int:
        """A negative number: ``sign`` (a minus) before the number ``tokens`` starts with."""
        taken = self._number(tokens, 0, prepared, out)
        group = prepared.numbers[-1]
        if group.kind == "time":  # "-7 h 30": the sign is kept before the time
            prepared.numbers[-1] = dataclasses.replace(group, sign=sign)
        else:  # a number, a date, an ordinal: the sign is kept before it
            prepared.numbers[-1] = dataclasses.replace(group, text=sign + group.text)
        return taken

    def _time(self, tokens: list[str], i: int, prepared: Prepared, out: list[str]) -> int:
        """A clock time "10 h", "10 h 15", perhaps followed by "du matin" / "du soir"."""
        token, mark = tokens[i], tokens[i + 1]
        minute_tok = tokens[i + 2] if i + 2 < len(tokens) else ""
        has_minute = (mark == "h" and re.fullmatch(r"\d{2}", minute_tok) is not None
                      and int(minute_tok) < 60)
        end = i + 2 + has_minute
        period = next((p for words, p in _PERIODS.items()
                       if tuple(tokens[end:end + len(words)]) == words), "")
        prepared.numbers.append(NumberGroup(
            "time", text=period, hour=int(token),
            minute=int(minute_tok) if has_minute else None))
        known = all(t in self.src_vocab for t in (token, minute_tok))
        if has_minute and not known and self.clocks:
            wanted = 60 * (int(token) % 12) + int(minute_tok)
            hour, minute = min(self.clocks, key=lambda c: (
                abs(60 * (c[0] % 12) + int(c[1]) - wanted), c))
            out += [str(hour), mark, minute]
            return end - i
        for k, t in enumerate(tokens[i:end]):
            near = None if t in _HOUR_MARKS or t in self.src_vocab \
                else self.nearest_number(t, below=25 if k == 0 else 60)
            out.append(near or t)
        return end - i

    def _join(self, tokens: list[str], fallback: str) -> str:
        """Text that the source codec reads back as exactly ``tokens``."""
        for text in (self.src_text.detokenize(tokens), " ".join(tokens)):
            if self.src_text.tokenize(text) == tokens:
                return text
        return fallback  # pragma: no cover - no spelling round-trips: translate as given

    # ------------------------------------------------------------------ target side

    def restore(self, prepared: Prepared, output: str) -> Carried:
        """Put the source's numbers and words back into the model's ``output``."""
        if not self.enabled:
            return Carried(prepared.source, output, (), (), prepared.text, output)
        tokens = self.tgt_text.tokenize(output) if output else []
        times = [g for g in prepared.numbers if g.kind == "time"]
        numbers = [g for g in prepared.numbers if g.kind in ("number", "date")]
        ordinals = [g for g in prepared.numbers if g.kind == "ordinal"]
        lost: list[str] = []
        out: list[str] = []
        i = 0
        while i < len(tokens):
            token = tokens[i]
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            meridiem = nxt if nxt in _MERIDIEM else None
            clock = _OUT_TIME.fullmatch(token)
            plain = _OUT_NUMBER.fullmatch(token)
            if (clock or (plain and meridiem)) and times:
                text, mark = times.pop(0).clock(meridiem)
                out.append(text)
                i += 2 if meridiem else 1
                if mark:
                    out.append(mark)
                    if i < len(tokens) and tokens[i] == ".":
                        i += 1  # "p.m." ends the sentence: "9 p.m.", not "9 p.m.."
                continue
            if _OUT_ORDINAL.fullmatch(token) and ordinals:
                out.append(ordinals.pop(0).text)
                i += 1
                continue
            if plain and numbers:
                group = numbers.pop(0)
                out.append(group.text + (plain.group(2) or ""))
                i += 1
                for _ in range(group.width - 1):  # the rest of a phone number the model wrote
                    if i < len(tokens) and _INT.fullmatch(tokens[i]):
                        i += 1
                continue
            out.append(prepared.names.get(token, token))
            i += 1
        for name, word in prepared.names.items():
            if name not in tokens:
                lost.append(word)
        lost += [g.clock(None)[0] for g in times] + [g.text for g in numbers + ordinals]
        lost += self._keep_names(prepared, out)
        lost += self._dropped(prepared, out)
        if prepared.added_stop and out and out[-1] == prepared.added_stop:
            out.pop()
        text = self.tgt_text.detokenize(out) if out != tokens else output
        if prepared.added_stop and text.endswith(prepared.added_stop) and out == tokens:
            text = text[:-len(prepared.added_stop)].rstrip()
        return Carried(prepared.source, text, tuple(prepared.unknown), tuple(lost),
                       prepared.text, output, tuple(prepared.notes),
                       ((prepared.text, output),), tuple(prepared.names.values()))

    def _keep_names(self, prepared: Prepared, out: list[str]) -> list[str]:
        """Names of the source the model knows, made to come back: one that is missing
        replaces the one name the output holds that the source does not (Paul, not Marc);
        those still missing are returned."""
        missing = [n for n in dict.fromkeys(prepared.kept) if n not in out]
        if not missing:
            return []
        source = set(self.src_text.tokenize(prepared.source))
        foreign = [k for k, t in enumerate(out) if t in self.name_set and t not in source
                   and t not in prepared.names.values()]
        if len(missing) == 1 and len(foreign) == 1:
            out[foreign[0]] = missing[0]
            return []
        return missing

    @staticmethod
    def _dropped(prepared: Prepared, out: list[str]) -> list[str]:
        """Words of the source the model copies (a name it knows, a word spelt alike in both
        vocabularies) that the output lacks, in any case: "Pierre et Marie visitent Lyon." ->
        "et pierre visit et marie." left out Lyon. Names that :meth:`_keep_names` handles
        are not named again."""
        written = {t.lower() for t in out}
        kept = set(prepared.kept)
        return list(dict.fromkeys(token for token, word in prepared.copied
                                  if token not in kept and word.lower() not in written))


def translate_carried(translator: Translator, sentences: Sequence[str],
                      beam: int | None = None, carry: Carry | None = None,
                      split: bool = True) -> list[Carried]:
    """Translate ``sentences`` with placeholders (see the module's docstring).

    With ``split``, a line of several sentences ("Je suis fatigué. J'ai faim.") is translated
    sentence by sentence and the translations joined with a space: a model trained on single
    sentences otherwise translates the first and drops the rest.
    """
    carry = carry or Carry.of(translator)
    pieces = [split_sentences(s) if split and carry.enabled else [s] for s in sentences]
    flat = [p for ps in pieces for p in (ps or [""])]
    done = _translate_pieces(translator, flat, beam, carry)
    results, k = [], 0
    for source, ps in zip(sentences, pieces, strict=True):
        parts = done[k:k + max(1, len(ps))]
        k += max(1, len(ps))
        if len(parts) == 1:
            results.append(dataclasses.replace(parts[0], source=source))
            continue
        results.append(Carried(
            source, " ".join(p.text for p in parts if p.text),
            tuple(u for p in parts for u in p.unknown), tuple(x for p in parts for x in p.lost),
            " ".join(p.prepared for p in parts), " ".join(p.raw for p in parts),
            tuple(n for p in parts for n in p.notes), tuple(x for p in parts for x in p.parts),
            tuple(n for p in parts for n in p.names)))
    return results


def _translate_pieces(translator: Translator, sentences: Sequence[str], beam: int | None,
                      carry: Carry) -> list[Carried]:
    results: list[Carried | None] = [None] * len(sentences)
    todo = list(range(len(sentences)))
    for attempt in range(RETRIES + 1):
        prepared = [carry.prepare(sentences[i], skip=attempt) for i in todo]
        out = translator.translate_detailed([p.text for p in prepared], beam=beam)
        retry = []
        for i, p, t in zip(todo, prepared, out, strict=True):
            carried = carry.restore(p, t.text)
            dropped = any(name not in carry.tgt_text.tokenize(t.text) for name in p.names)
            if not carry.enabled:
                carried = Carried(p.source, t.text, t.unknown, (), p.text, t.text,
                                  parts=((p.text, t.text),))
            if results[i] is None or not dropped:
                results[i] = carried
            if dropped:
                retry.append(i)
        todo = retry
        if not todo:
            break
    return [r for r in results if r is not None]


def sentence_scores(translator: Translator, sources: Sequence[str], outputs: Sequence[str]
                    ) -> list[float]:
    """Mean log-probability per token (EOS included) the model gives ``outputs[i]`` as the
    translation of ``sources[i]``: how sure it is, as fairseq and Marian report it."""
    return [sum(t) / len(t) for t in token_scores(translator, sources, outputs)]


def token_scores(translator: Translator, sources: Sequence[str], outputs: Sequence[str]
                 ) -> list[list[float]]:
    """The log-probability the model gives each token of ``outputs[i]`` (EOS included) as
    the translation of ``sources[i]``."""
    import torch

    model, cfg = translator.model, translator.model.config
    values = []
    with torch.no_grad():
        for source, output in zip(sources, outputs, strict=True):
            src = translator.src_vocab.encode(translator.src_text.tokenize(source))
            tgt = translator.tgt_vocab.encode(translator.tgt_text.tokenize(output))
            tgt = tgt[:cfg.max_len]
            src_t = torch.tensor([src[:cfg.max_len]], device=translator.device)  # (1, S)
            tgt_in = torch.tensor([[cfg.bos_id, *tgt[:-1]]], device=translator.device)  # (1, T)
            logp = model(src_t, tgt_in).log_softmax(-1)[0]  # (T, V)
            picked = logp.gather(1, torch.tensor(tgt, device=translator.device)[:, None])
            values.append(picked[:, 0].tolist())
    return values


# A translation is flagged as likely wrong when the model gave one of its tokens less than
# 1/e (a log-probability below -1), or its tokens less than 1/sqrt(e) on average; round
# values, not fitted: book/sweeps/confidence_eval.py measures what they catch.
LOW_TOKEN = -1.0
LOW_SCORE = -0.5
LENGTH_RATIO = 2.0  # words of output against source (or the inverse) above this: flagged
_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class Confidence:
    """How sure the model is of a translation, and why it is likely wrong (if it is)."""

    score: float  # mean log-probability per token; the lowest of a line's sentences
    reasons: tuple[str, ...] = ()  # empty: no warning

    @property
    def flagged(self) -> bool:
        """Whether the translation is likely wrong."""
        return bool(self.reasons)


def assess(translator: Translator, carried: Sequence[Carried], low_score: float = LOW_SCORE,
           low_token: float = LOW_TOKEN) -> list[Confidence]:
    """A score and the warning signs of each translation (from :func:`translate_carried`):
    a low model probability (a token below ``low_token``, or a mean below ``low_score``),
    source words the model read as unknown or that were not carried over, an output that
    copies its source or is far longer or shorter than it, an empty output."""
    parts = [part for c in carried for part in (c.parts or ((c.prepared, c.raw),))]
    tokens_of = token_scores(translator, [p for p, _ in parts], [r for _, r in parts])
    out, k = [], 0
    for c in carried:
        n = len(c.parts or ((c.prepared, c.raw),))
        mine = tokens_of[k:k + n]
        score = min(sum(t) / len(t) for t in mine)
        least = min(min(t) for t in mine)
        k += n
        reasons = []
        if not c.text:
            reasons.append("the translation is empty")
        if score < low_score or least < low_token:
            reasons.append(f"the model is unsure (log-probability {score:.2f} a token, "
                           f"{least:.2f} at the least)")
        if c.unknown:
            reasons.append(f"words it read as unknown: {', '.join(dict.fromkeys(c.unknown))}")
        if c.lost:
            reasons.append(f"not carried over: {', '.join(c.lost)}")
        tokens = translator.tgt_text.tokenize(c.text) if c.text else []
        if tokens and tokens == translator.src_text.tokenize(c.source):
            reasons.append("the output copies the source")
        src_words = sum(1 for t in translator.src_text.tokenize(c.source) if _WORD.search(t))
        out_words = sum(1 for t in tokens if _WORD.search(t))
        if c.text and abs(src_words - out_words) >= 3 and (
                out_words > LENGTH_RATIO * src_words or src_words > LENGTH_RATIO * out_words):
            reasons.append(f"{out_words} words for {src_words} in the source")
        out.append(Confidence(score, tuple(reasons)))
    return out


@dataclass(frozen=True)
class FlagCounts:
    """How the warnings of :func:`assess` fall on translations whose reference is known."""

    pairs: int
    wrong: int  # translations that are not the reference word for word
    wrong_flagged: int
    right_flagged: int

    @property
    def right(self) -> int:
        return self.pairs - self.wrong

    @property
    def flagged(self) -> int:
        return self.wrong_flagged + self.right_flagged

    @property
    def caught(self) -> float:
        """The share of wrong translations that carry a warning (nan without a wrong one)."""
        return self.wrong_flagged / self.wrong if self.wrong else float("nan")

    @property
    def spared(self) -> float:
        """The share of right translations without a warning (nan without a right one)."""
        return 1 - self.right_flagged / self.right if self.right else float("nan")

    @property
    def lift(self) -> float:
        """How much likelier a flagged translation is to be wrong than an unflagged one: the
        share of wrong ones among the flagged minus that among the others (nan if either
        group is empty)."""
        if not self.flagged or self.flagged == self.pairs:
            return float("nan")
        unflagged_wrong = self.wrong - self.wrong_flagged
        return (self.wrong_flagged / self.flagged
                - unflagged_wrong / (self.pairs - self.flagged))

    def __add__(self, other: FlagCounts) -> FlagCounts:
        return FlagCounts(self.pairs + other.pairs, self.wrong + other.wrong,
                          self.wrong_flagged + other.wrong_flagged,
                          self.right_flagged + other.right_flagged)


def count_flags(translator: Translator, pairs: Sequence[tuple[str, str]],
                beam: int | None = None) -> FlagCounts:
    """Translate the sources of ``pairs`` as ``labformer translate --scores`` does (carried
    over, then assessed) and count the warnings on wrong and on right translations. A
    translation is right when it is the reference word for word, the reference read as the
    model reads its targets (``evaluate``'s exact match)."""
    if not pairs:
        raise ValueError("count_flags needs at least one (source, reference) pair")
    carried = translate_carried(translator, [src for src, _ in pairs], beam=beam)
    verdicts = assess(translator, carried)
    wrong_flagged = right_flagged = wrong = 0
    for c, v, (_, ref) in zip(carried, verdicts, pairs, strict=True):
        right = c.text.split() == translator.tgt_text.normalize(ref).split()
        wrong += not right
        wrong_flagged += v.flagged and not right
        right_flagged += v.flagged and right
    return FlagCounts(len(pairs), wrong, wrong_flagged, right_flagged)
