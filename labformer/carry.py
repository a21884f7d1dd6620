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
model wrote fewer numbers than the source has, or dropped a placeholder) is listed in
:attr:`Carried.lost`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .data import TextCodec, Vocab

if TYPE_CHECKING:
    from .translate import Translator

__all__ = ["Carried", "Carry", "NumberGroup", "Prepared", "translate_carried"]

_INT = re.compile(r"\d+")
_DECIMAL = re.compile(r"\d+[.,]\d+")
_THOUSANDS = re.compile(r"\d{3}")
_HOUR_MARKS = ("h", "h.")  # French "10 h 15"; Moses keeps "h." at the end
_STOPS = frozenset(".?!…")
# English output: a clock time, an amount with thousands commas, a plain or decimal number;
# a hyphenated tail ("5-minute") is kept.
_OUT_TIME = re.compile(r"(\d{1,2}):(\d{2})")
_OUT_NUMBER = re.compile(r"(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(-\w+)?")
_MERIDIEM = ("a.m.", "p.m.")
RETRIES = 2  # other placeholder names tried when the model drops one


@dataclass(frozen=True)
class NumberGroup:
    """A number of the source, as the target should write it.

    ``kind``: "time" (``hour`` and ``minute``, minute None for "21 h") or "number" (``text``,
    already in the target's format: decimal point, thousands commas).
    """

    kind: str
    text: str = ""
    hour: int = 0
    minute: int | None = None

    def clock(self, meridiem: str | None) -> tuple[str, str | None]:
        """The time as text, and the a.m./p.m. mark to write after it (or None).

        ``meridiem`` is the mark the model wrote, if any: with one, a 24-hour source time is
        written on the 12-hour clock ("17 h" -> "5", "p.m."); an hour of 1 to 12 keeps the
        model's mark, which has read "du soir" or "du matin".
        """
        hour, mark = self.hour, meridiem
        if meridiem is not None:
            if hour == 0 or hour == 24:
                hour, mark = 12, "a.m."
            elif hour > 12:
                hour, mark = hour - 12, "p.m."
        if self.minute is None:
            return (f"{hour}" if mark else f"{hour}:00"), mark
        return f"{hour}:{self.minute:02d}", mark


@dataclass
class Prepared:
    """A source rewritten for the model, and what to put back into its translation."""

    source: str  # as given
    text: str  # as the model reads it
    numbers: list[NumberGroup] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # placeholder -> source word
    unknown: list[str] = field(default_factory=list)  # left as UNK (no placeholder)
    added_stop: str | None = None  # final punctuation added to the source


@dataclass(frozen=True)
class Carried:
    """A translation with the source's numbers and unknown words put back."""

    source: str
    text: str
    unknown: tuple[str, ...] = ()  # source words the model read as UNK
    lost: tuple[str, ...] = ()  # numbers or words that could not be put back
    prepared: str = ""  # the source as the model read it
    raw: str = ""  # the model's output, before anything was put back


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
        if len(tokens) > 1:  # thousands groups
            return f"{int(''.join(tokens)):,}"
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
            if _shape(token) is not None:
                j = i + 1  # "2 000 000": one number, written 2,000,000
                if _INT.fullmatch(token) and len(token) <= 3:
                    while j < len(tokens) and _THOUSANDS.fullmatch(tokens[j]):
                        j += 1
                group = tokens[i:j]
                nxt = tokens[j] if j < len(tokens) else ""
                is_time = (len(group) == 1 and _INT.fullmatch(token) is not None
                           and int(token) <= 24 and nxt in _HOUR_MARKS)
                if is_time:
                    minute_tok = tokens[j + 1] if j + 1 < len(tokens) else ""
                    has_minute = (nxt == "h" and re.fullmatch(r"\d{2}", minute_tok) is not None
                                  and int(minute_tok) < 60)
                    prepared.numbers.append(NumberGroup(
                        "time", hour=int(token),
                        minute=int(minute_tok) if has_minute else None))
                    end = j + 1 + has_minute
                    known = all(t in self.src_vocab for t in (token, minute_tok))
                    if has_minute and not known and self.clocks:
                        wanted = 60 * (int(token) % 12) + int(minute_tok)
                        hour, minute = min(self.clocks, key=lambda c: (
                            abs(60 * (c[0] % 12) + int(c[1]) - wanted), c))
                        out += [str(hour), nxt, minute]
                        i = end
                        continue
                    for k, t in enumerate(tokens[i:end]):
                        near = None if t in _HOUR_MARKS or t in self.src_vocab \
                            else self.nearest_number(t, below=25 if k == 0 else 60)
                        out.append(near or t)
                    i = end
                    continue
                prepared.numbers.append(NumberGroup("number", text=self._format(group)))
                if all(t in self.src_vocab for t in group):
                    out.extend(group)
                else:
                    near = self.nearest_number(group[0] if len(group) == 1
                                               else "".join(group))
                    out.append(near or group[0])
                i = j
                continue
            word = self.known_case(token, first=i == 0, shouting=shouting)
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
        numbers = [g for g in prepared.numbers if g.kind == "number"]
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
                if mark:
                    out.append(mark)
                i += 2 if meridiem else 1
                continue
            if plain and numbers:
                out.append(numbers.pop(0).text + (plain.group(2) or ""))
                i += 1
                continue
            out.append(prepared.names.get(token, token))
            i += 1
        for name, word in prepared.names.items():
            if name not in tokens:
                lost.append(word)
        lost += [g.clock(None)[0] for g in times] + [g.text for g in numbers]
        if prepared.added_stop and out and out[-1] == prepared.added_stop:
            out.pop()
        text = self.tgt_text.detokenize(out) if out != tokens else output
        if prepared.added_stop and text.endswith(prepared.added_stop) and out == tokens:
            text = text[:-len(prepared.added_stop)].rstrip()
        return Carried(prepared.source, text, tuple(prepared.unknown), tuple(lost),
                       prepared.text, output)


def translate_carried(translator: Translator, sentences: Sequence[str],
                      beam: int | None = None, carry: Carry | None = None) -> list[Carried]:
    """Translate ``sentences`` with placeholders (see the module's docstring)."""
    carry = carry or Carry.of(translator)
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
                carried = Carried(p.source, t.text, t.unknown, (), p.text, t.text)
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
            values.append(float(picked.mean()))
    return values
