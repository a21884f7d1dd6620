"""A small generative grammar of French sentences with their English translations.

Each call of :meth:`SentenceGenerator.sentence` builds one French token list and, in
lockstep, its English translation, so that the translation is a function of the French
sentence (the fr -> en direction is deterministic). French surface rules (elision,
contraction, *ma* -> *mon* before a vowel) run in one pass at the end (:func:`french_surface`),
the English a -> an rule likewise (:func:`english_surface`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from labformer.data import lexicon as lx

MAX_TOKENS = 20  # both sides, punctuation included
Pair = tuple[str, str]  # (adjective lemma, noun), French dictionary forms

# Verbs whose subject may be an animal ("le chien mange une pomme"); all take people.
_ANIMAL_SUBJECT = frozenset({"aimer", "regarder", "voir", "manger", "boire", "chercher",
                             "trouver", "dormir", "jouer", "marcher", "nager", "courir",
                             "rester"})
_ELIDABLE = {"le": "l'", "la": "l'", "je": "j'", "ne": "n'", "de": "d'", "que": "qu'"}
_CONTRACTIONS = {("à", "le"): "au", ("à", "les"): "aux", ("de", "le"): "du",
                 ("de", "les"): "des"}
_POSSESSIVE_BEFORE_VOWEL = {"ma": "mon", "ta": "ton"}


def french_surface(tokens: list[str]) -> list[str]:
    """Apply elision (le -> l'), contraction (à le -> au) and ma -> mon before a vowel."""
    out: list[str] = []
    for i, token in enumerate(tokens):
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if token in _ELIDABLE and lx.starts_with_vowel(nxt):
            token = _ELIDABLE[token]
        elif token in _POSSESSIVE_BEFORE_VOWEL and lx.starts_with_vowel(nxt):
            token = _POSSESSIVE_BEFORE_VOWEL[token]
        if out and (out[-1], token) in _CONTRACTIONS:
            out[-1] = _CONTRACTIONS[out[-1], token]
            continue
        out.append(token)
    return out


def english_surface(tokens: list[str]) -> list[str]:
    """Apply the English article rule: "a" becomes "an" before a vowel letter."""
    return ["an" if t == "a" and i + 1 < len(tokens) and tokens[i + 1][0] in "aeiou" else t
            for i, t in enumerate(tokens)]


@dataclass
class Phrase:
    """French and English tokens built together, plus what the phrase says about itself."""

    fr: list[str]
    en: list[str]
    person: int = 2  # 0-5: je, tu, il/elle, nous, vous, ils/elles
    feminine: bool = False
    plural: bool = False
    cls: str = lx.PERSON
    pairs: set[Pair] = field(default_factory=set)  # adjective-noun combinations used
    noun: lx.Noun | None = None  # head noun of a noun phrase


class SentenceGenerator:
    """Draws random sentence pairs; ``banned`` adjective-noun pairs are never produced,
    except one ``forced`` pair, which :meth:`sentence` puts in the sentence it returns."""

    def __init__(self, rng: random.Random, banned: frozenset[Pair] = frozenset()) -> None:
        self.rng = rng
        self.banned = banned
        self._force: Pair | None = None
        self._noun_cache: dict[frozenset[str], list[lx.Noun]] = {}
        self._adj_cache: dict[tuple[str, bool], list[lx.Adjective]] = {}
        self._adjectives = {adj.lemma: adj for adj in lx.ADJECTIVES}

    # ----------------------------------------------------------------- words

    def _nouns(self, keys: frozenset[str]) -> list[lx.Noun]:
        """Nouns whose class or a tag is in ``keys``, in lexicon order (cached)."""
        nouns = self._noun_cache.get(keys)
        if nouns is None:
            nouns = [n for n in lx.NOUNS if keys & {n.cls, *n.tags}]
            self._noun_cache[keys] = nouns
        return nouns

    def _pick_noun(self, keys: frozenset[str]) -> lx.Noun:
        """A random noun of ``keys``; the forced pair's noun whenever it fits."""
        if self._force is not None:
            forced = [n for n in self._nouns(keys) if n.fr == self._force[1]]
            if forced:
                return forced[0]
        return self.rng.choice(self._nouns(keys))

    def _adjective_choices(self, noun: lx.Noun, preposed: bool) -> list[lx.Adjective]:
        """Adjectives that fit ``noun`` and are not banned with it (cached)."""
        choices = self._adj_cache.get((noun.fr, preposed))
        if choices is None:
            choices = [a for a in lx.ADJECTIVES if a.preposed == preposed
                       and noun.cls in a.classes and (a.lemma, noun.fr) not in self.banned]
            self._adj_cache[noun.fr, preposed] = choices
        return choices

    def _take_forced(self, noun_fr: str, cls: str) -> lx.Adjective | None:
        """The forced adjective if it belongs with this noun (and then forget it)."""
        if self._force is None or self._force[1] != noun_fr:
            return None
        adj = self._adjectives[self._force[0]]
        if cls not in adj.classes:  # pragma: no cover - held-out pairs are always compatible
            return None
        self._force = None
        return adj

    @staticmethod
    def _adj_form(adj: lx.Adjective, feminine: bool, plural: bool, next_fr: str) -> str:
        if adj.before_vowel and not feminine and not plural and lx.starts_with_vowel(next_fr):
            return adj.before_vowel
        return adj.forms[int(feminine) + 2 * int(plural)]

    # ----------------------------------------------------------- noun phrases

    def noun_phrase(self, keys: frozenset[str], determiners: tuple[str, ...] = (
            "def", "def", "indef", "poss", "num"), negated: bool = False,
            use_forced: bool = True) -> Phrase:
        """Determiner, optional adjectives (preposed / postposed) and a noun of ``keys``."""
        rng = self.rng
        noun = self._pick_noun(keys)
        det = rng.choice(determiners)
        plural = noun.fr_pl is not None and (det == "num" or rng.random() < 0.3)
        if det == "num" and not plural:
            det = "def"
        fem = noun.feminine
        noun_fr = noun.fr_pl if plural else noun.fr
        noun_en = noun.en_pl if plural else noun.en
        assert noun_fr is not None and noun_en is not None

        pre: lx.Adjective | None = None
        post: lx.Adjective | None = None
        forced = self._take_forced(noun.fr, noun.cls) if use_forced else None
        if forced is not None:
            pre, post = (forced, None) if forced.preposed else (None, forced)
        shape = rng.random()
        if pre is None and (shape < 0.2 or 0.45 <= shape < 0.6):
            choices = self._adjective_choices(noun, preposed=True)
            pre = rng.choice(choices) if choices else None
        if post is None and 0.2 <= shape < 0.6:
            choices = self._adjective_choices(noun, preposed=False)
            if pre is not None:  # two adjectives only with colours and nationalities
                choices = [a for a in choices if a.lemma in lx.STACKABLE]
            post = rng.choice(choices) if choices else None

        fr_det, en_det = self._determiner(det, fem, plural, negated)
        if fr_det == ["des"] and pre is not None:  # des -> de before an adjective
            fr_det = ["de"]
        fr = [*fr_det]
        en = [*en_det]
        pairs: set[Pair] = set()
        if pre is not None:
            fr.append(self._adj_form(pre, fem, plural, noun_fr))
            en.append(pre.english(noun.cls))
            pairs.add((pre.lemma, noun.fr))
        if post is not None:
            en.append(post.english(noun.cls))
            pairs.add((post.lemma, noun.fr))
        fr.append(noun_fr)
        en.append(noun_en)
        if post is not None:
            fr.append(self._adj_form(post, fem, plural, ""))
        return Phrase(fr, en, 5 if plural else 2, fem, plural, noun.cls, pairs, noun)

    def _determiner(self, det: str, fem: bool, plural: bool, negated: bool
                    ) -> tuple[list[str], list[str]]:
        rng = self.rng
        if det == "indef" and negated:  # ne ... pas de: "je n'ai pas de chat"
            return ["de"], (["any"] if plural else ["a"])
        if det == "indef":
            return ([("des" if plural else "une" if fem else "un")],
                    ["some"] if plural else ["a"])
        if det == "poss":
            fr_m, fr_f, fr_pl, en = rng.choice(lx.POSSESSIVES)
            return [fr_pl if plural else fr_f if fem else fr_m], [en]
        if det == "num":
            fr_num, en_num = rng.choice(lx.NUMBERS)
            return [fr_num], [en_num]
        return [("les" if plural else "la" if fem else "le")], ["the"]

    def subject(self, keys: frozenset[str] = frozenset({lx.PERSON}), pronoun_p: float = 0.45,
                use_forced: bool = True) -> Phrase:
        """A subject pronoun (je, tu, ...) or a noun phrase."""
        if self._force is None and self.rng.random() < pronoun_p:
            fr, en, person, fem, plural = self.rng.choice(lx.PRONOUNS)
            if fem is None:
                fem = self.rng.random() < 0.5
            return Phrase([fr], [en], person, fem, plural, lx.PERSON)
        return self.noun_phrase(keys, ("def", "def", "indef", "poss", "num"),
                                use_forced=use_forced)

    def prepositional(self, keys: frozenset[str] | None = None) -> Phrase:
        """A locative (sous la table), comitative (avec mon frère) or benefactive phrase."""
        rng = self.rng
        kind = rng.random()
        if keys is None and kind < 0.15:
            np = self.noun_phrase(frozenset({lx.PERSON, lx.ANIMAL}), ("def", "indef", "poss"))
            return Phrase(["avec", *np.fr], ["with", *np.en], pairs=np.pairs)
        if keys is None and kind < 0.25:
            np = self.noun_phrase(frozenset({lx.PERSON}), ("def", "indef", "poss"))
            return Phrase(["pour", *np.fr], ["for", *np.en], pairs=np.pairs)
        fr_prep, en_prep, accepted = rng.choice(
            [loc for loc in lx.LOCATIVES if keys is None or loc[2] & keys])
        # no indefinite after "de" (près de des ... is not French)
        dets = ("def", "def", "poss") if fr_prep[-1] == "de" else ("def", "def", "indef", "poss")
        np = self.noun_phrase(accepted if keys is None else accepted & keys, dets)
        return Phrase([*fr_prep, *np.fr], [*en_prep, *np.en], pairs=np.pairs)

    # -------------------------------------------------------------- sentences

    def sentence(self, forced: Pair | None = None) -> tuple[list[str], list[str], set[Pair]]:
        """One (French tokens, English tokens, adjective-noun pairs) triple, 2-20 tokens."""
        while True:
            self._force = forced
            fr, en, pairs = self._draw()
            self._force = None
            if forced is not None and forced not in pairs:
                continue
            fr = french_surface(fr)
            en = english_surface(en)
            if 2 <= len(fr) <= MAX_TOKENS and 2 <= len(en) <= MAX_TOKENS:
                return fr, en, pairs

    def _draw(self) -> tuple[list[str], list[str], set[Pair]]:
        rng = self.rng
        mode = rng.choices(("statement", "negation", "question"), (0.6, 0.2, 0.2))[0]
        kind = rng.choices(
            ("transitive", "avoir", "adjective", "profession", "intransitive", "motion",
             "locative", "existential"),
            (0.3, 0.12, 0.14, 0.06, 0.1, 0.1, 0.1, 0.08))[0]
        if self._force is not None:  # only some templates can hold an adjective-noun pair
            kind = rng.choice(("transitive", "avoir", "adjective", "locative", "existential"))
        if kind == "existential":
            return self._existential(mode == "question")
        template = {"transitive": self._transitive, "avoir": self._avoir,
                    "adjective": self._adjective, "profession": self._profession,
                    "intransitive": self._intransitive, "motion": self._motion,
                    "locative": self._locative}[kind]
        subj, verb, rest, en_rest, pairs = template(mode)
        pairs = pairs | subj.pairs
        return (*self._clause(subj, verb, rest, en_rest, mode), pairs)

    def _clause(self, subj: Phrase, verb: lx.Verb, fr_rest: list[str], en_rest: list[str],
                mode: str) -> tuple[list[str], list[str]]:
        """Conjugate ``verb`` for ``subj`` and assemble the statement, negation or question."""
        fr_verb = verb.forms[subj.person]
        is_be = verb is lx.ETRE
        third = subj.person == 2
        en_base, en_3sg = verb.en, verb.en_3sg
        if is_be:
            en_verb = lx.EN_BE[subj.person]
        else:
            en_verb = en_3sg if third else en_base
        if mode == "negation":
            fr = [*subj.fr, "ne", fr_verb, "pas", *fr_rest, "."]
            if is_be:
                en = [*subj.en, en_verb, "not", *en_rest, "."]
            else:
                en = [*subj.en, "does" if third else "do", "not", *en_base.split(), *en_rest,
                      "."]
        elif mode == "question":
            fr = ["est-ce", "que", *subj.fr, fr_verb, *fr_rest, "?"]
            if is_be:
                en = [en_verb, *subj.en, *en_rest, "?"]
            else:
                en = ["does" if third else "do", *subj.en, *en_base.split(), *en_rest, "?"]
        else:
            fr = [*subj.fr, fr_verb, *fr_rest, "."]
            en = [*subj.en, *en_verb.split(), *en_rest, "."]
        return fr, en

    def _transitive(self, mode: str) -> tuple[Phrase, lx.Verb, list[str], list[str], set[Pair]]:
        rng = self.rng
        verb = rng.choice(lx.TRANSITIVE_VERBS)
        if self._force is not None:
            noun = next(n for n in lx.NOUNS if n.fr == self._force[1])
            fitting = [v for v in lx.TRANSITIVE_VERBS if v.objects & {noun.cls, *noun.tags}]
            verb = rng.choice(fitting) if fitting else verb
        keys = frozenset({lx.PERSON, lx.ANIMAL} if verb.infinitive in _ANIMAL_SUBJECT
                         else {lx.PERSON})
        subj = self.subject(keys)
        obj = self.noun_phrase(verb.objects, ("def", "def", "indef", "indef", "poss", "num"),
                               negated=mode == "negation")
        for cls, base, third in verb.en_by_class:  # porter: wear clothes, carry the rest
            if obj.cls == cls:
                verb = lx.Verb(verb.infinitive, verb.forms, base, third, verb.objects)
        fr, en, pairs = obj.fr, obj.en, set(obj.pairs)
        if rng.random() < 0.25:
            pp = self.prepositional()
            fr, en = [*fr, *pp.fr], [*en, *pp.en]
            pairs |= pp.pairs
        return subj, verb, fr, en, pairs

    def _avoir(self, mode: str) -> tuple[Phrase, lx.Verb, list[str], list[str], set[Pair]]:
        subj = self.subject()
        obj = self.noun_phrase(lx.AVOIR.objects, ("indef", "indef", "num", "def", "poss"),
                               negated=mode == "negation")
        return subj, lx.AVOIR, obj.fr, obj.en, obj.pairs

    def _adjective(self, mode: str) -> tuple[Phrase, lx.Verb, list[str], list[str], set[Pair]]:
        """Predicative adjective: "la voiture est rouge", "elle est grande"."""
        keys = frozenset({lx.PERSON, lx.ANIMAL, lx.FOOD, lx.DRINK, lx.THING, lx.CLOTHES,
                          lx.VEHICLE, lx.PLACE})
        # a forced pair goes to the predicate half of the time: "la voiture est rouge"
        subj = self.subject(keys, pronoun_p=0.35, use_forced=self.rng.random() < 0.5)
        noun = subj.noun
        adj = self._take_forced(noun.fr, noun.cls) if noun is not None else None
        if adj is None:
            key = noun.fr if noun is not None else ""
            choices = [a for a in lx.ADJECTIVES if subj.cls in a.classes
                       and (a.lemma, key) not in self.banned
                       and (a.lemma, key) not in subj.pairs]
            adj = self.rng.choice(choices)
        pairs = {(adj.lemma, noun.fr)} if noun is not None else set()
        fr_adj = adj.forms[int(subj.feminine) + 2 * int(subj.plural)]
        return subj, lx.ETRE, [fr_adj], [adj.english(subj.cls)], pairs

    def _profession(self, mode: str) -> tuple[Phrase, lx.Verb, list[str], list[str], set[Pair]]:
        """"je suis étudiant" -> "i am a student": no article in French, a/an in English."""
        subj = self.subject(pronoun_p=0.6)  # "mon frère est médecin" works the same way
        prof = self.rng.choice(lx.PROFESSIONS)
        fr = prof.forms[int(subj.feminine) + 2 * int(subj.plural)]
        en = prof.en_pl.split() if subj.plural else ["a", *prof.en.split()]
        return subj, lx.ETRE, [fr], en, set()

    def _intransitive(self, mode: str
                      ) -> tuple[Phrase, lx.Verb, list[str], list[str], set[Pair]]:
        verb = self.rng.choice(lx.INTRANSITIVE_VERBS)
        keys = frozenset({lx.PERSON, lx.ANIMAL} if verb.infinitive in _ANIMAL_SUBJECT
                         else {lx.PERSON})
        subj = self.subject(keys)
        if self.rng.random() < 0.6:
            pp = self.prepositional()
            return subj, verb, pp.fr, pp.en, pp.pairs
        return subj, verb, [], [], set()

    def _motion(self, mode: str) -> tuple[Phrase, lx.Verb, list[str], list[str], set[Pair]]:
        """aller à / venir de / habiter à: "je vais au marché" -> "i go to the market"."""
        rng = self.rng
        verb = rng.choice((lx.ALLER, lx.VENIR, lx.HABITER))
        subj = self.subject()
        fr_prep, en_prep = {"aller": ("à", "to"), "venir": ("de", "from"),
                            "habiter": ("à", "in")}[verb.infinitive]
        if rng.random() < 0.35:
            city = rng.choice(sorted(lx.CITIES))
            return subj, verb, [fr_prep, city], [en_prep, lx.CITIES[city]], set()
        if verb is lx.HABITER:  # one lives *in* a house: "dans une petite maison"
            np = self.noun_phrase(frozenset({"home"}), ("def", "indef", "poss"))
            return subj, verb, ["dans", *np.fr], ["in", *np.en], np.pairs
        np = self.noun_phrase(frozenset({lx.PLACE}), ("def", "def", "poss"))
        return subj, verb, [fr_prep, *np.fr], [en_prep, *np.en], np.pairs

    def _locative(self, mode: str) -> tuple[Phrase, lx.Verb, list[str], list[str], set[Pair]]:
        """"le chat est sous la table" -> "the cat is under the table"."""
        keys = frozenset({lx.PERSON, lx.ANIMAL, lx.THING, lx.CLOTHES, lx.VEHICLE})
        subj = self.subject(keys, pronoun_p=0.3)
        pp = self.prepositional(frozenset({lx.PLACE, "container", "furniture", lx.VEHICLE}))
        return subj, lx.ETRE, pp.fr, pp.en, pp.pairs

    def _existential(self, question: bool) -> tuple[list[str], list[str], set[Pair]]:
        """"il y a deux chats dans le jardin" -> "there are two cats in the garden"."""
        np = self.noun_phrase(frozenset({lx.PERSON, lx.ANIMAL, lx.THING, lx.CLOTHES,
                                         lx.VEHICLE, lx.FOOD}), ("indef", "indef", "num"))
        pp = self.prepositional(frozenset({lx.PLACE, "container", "furniture"}))
        be = "are" if np.plural else "is"
        if question:
            fr = ["est-ce", "que", "il", "y", "a", *np.fr, *pp.fr, "?"]
            en = [be, "there", *np.en, *pp.en, "?"]
        else:
            fr = ["il", "y", "a", *np.fr, *pp.fr, "."]
            en = ["there", be, *np.en, *pp.en, "."]
        return fr, en, np.pairs | pp.pairs
