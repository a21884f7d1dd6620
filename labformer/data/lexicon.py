"""The toy corpus's lexicon: French words with their English translations.

Every entry is written out by hand (no inflection rules to get wrong): nouns carry both
numbers and a gender, adjectives their four forms (and the special masculine form used
before a vowel: *vieil*, *bel*, *nouvel*), verbs their six present-tense forms. Nouns and
adjectives carry semantic *classes* so that generated sentences stay plausible
(one eats food, reads things that can be read, a colour describes an object, not a soup).
"""

from __future__ import annotations

from dataclasses import dataclass

# Semantic noun classes. A noun has exactly one; adjectives and verbs list the ones they accept.
PERSON, ANIMAL, FOOD, DRINK, THING, CLOTHES, VEHICLE, PLACE = (
    "person", "animal", "food", "drink", "thing", "clothes", "vehicle", "place",
)


@dataclass(frozen=True)
class Noun:
    """A French noun: gender, both numbers, English forms and its tags (class + affordances)."""

    fr: str
    fr_pl: str | None  # None: singular only (mass nouns, and nouns whose plural looks the same)
    feminine: bool
    en: str
    en_pl: str | None
    cls: str
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Adjective:
    """A French adjective: forms (ms, fs, mp, fp), vowel form, position, English, classes."""

    forms: tuple[str, str, str, str]
    en: str
    classes: frozenset[str]
    preposed: bool = False
    before_vowel: str | None = None  # masculine singular before a vowel: vieux -> vieil
    en_person: str | None = None  # English word used for people (grand: big -> tall)

    @property
    def lemma(self) -> str:
        """Dictionary form (masculine singular)."""
        return self.forms[0]

    def english(self, cls: str) -> str:
        """English translation for a noun of class ``cls``."""
        return self.en_person if (self.en_person and cls == PERSON) else self.en


@dataclass(frozen=True)
class Verb:
    """A French verb: six present forms (je, tu, il, nous, vous, ils) and English forms."""

    infinitive: str
    forms: tuple[str, str, str, str, str, str]
    en: str  # base form, may hold a particle: "look at"
    en_3sg: str
    objects: frozenset[str] = frozenset()  # noun classes / tags accepted as direct object
    en_by_class: tuple[tuple[str, str, str], ...] = ()  # (class, base, 3sg) overrides


def _n(fr: str, fr_pl: str | None, gender: str, en: str, en_pl: str | None, cls: str,
       *tags: str) -> Noun:
    return Noun(fr, fr_pl, gender == "f", en, en_pl, cls, frozenset(tags))


NOUNS: tuple[Noun, ...] = (
    # people
    _n("homme", "hommes", "m", "man", "men", PERSON, "audible"),
    _n("femme", "femmes", "f", "woman", "women", PERSON, "audible"),
    _n("garçon", "garçons", "m", "boy", "boys", PERSON, "audible"),
    _n("fille", "filles", "f", "girl", "girls", PERSON, "audible"),
    _n("enfant", "enfants", "m", "child", "children", PERSON, "audible"),
    _n("ami", "amis", "m", "friend", "friends", PERSON, "audible"),
    _n("amie", "amies", "f", "friend", "friends", PERSON, "audible"),
    _n("frère", "frères", "m", "brother", "brothers", PERSON, "audible"),
    _n("sœur", "sœurs", "f", "sister", "sisters", PERSON, "audible"),
    _n("père", "pères", "m", "father", "fathers", PERSON, "audible"),
    _n("mère", "mères", "f", "mother", "mothers", PERSON, "audible"),
    _n("bébé", "bébés", "m", "baby", "babies", PERSON, "audible"),
    # animals
    _n("chat", "chats", "m", "cat", "cats", ANIMAL, "audible"),
    _n("chien", "chiens", "m", "dog", "dogs", ANIMAL, "audible"),
    _n("cheval", "chevaux", "m", "horse", "horses", ANIMAL),
    _n("oiseau", "oiseaux", "m", "bird", "birds", ANIMAL, "audible"),
    _n("lapin", "lapins", "m", "rabbit", "rabbits", ANIMAL),
    _n("vache", "vaches", "f", "cow", "cows", ANIMAL),
    _n("canard", "canards", "m", "duck", "ducks", ANIMAL, "audible"),
    _n("éléphant", "éléphants", "m", "elephant", "elephants", ANIMAL),
    # food and drink
    _n("pomme", "pommes", "f", "apple", "apples", FOOD),
    _n("gâteau", "gâteaux", "m", "cake", "cakes", FOOD),
    _n("banane", "bananes", "f", "banana", "bananas", FOOD),
    _n("œuf", "œufs", "m", "egg", "eggs", FOOD),
    _n("sandwich", "sandwichs", "m", "sandwich", "sandwiches", FOOD),
    _n("poire", "poires", "f", "pear", "pears", FOOD),
    _n("citron", "citrons", "m", "lemon", "lemons", FOOD),
    _n("soupe", None, "f", "soup", None, FOOD),
    _n("fromage", None, "m", "cheese", None, FOOD),
    _n("café", None, "m", "coffee", None, DRINK),
    _n("thé", None, "m", "tea", None, DRINK),
    _n("lait", None, "m", "milk", None, DRINK),
    _n("eau", None, "f", "water", None, DRINK),
    # things
    _n("livre", "livres", "m", "book", "books", THING, "readable", "openable", "writable"),
    _n("lettre", "lettres", "f", "letter", "letters", THING, "readable", "openable",
       "writable"),
    _n("journal", "journaux", "m", "newspaper", "newspapers", THING, "readable"),
    _n("chanson", "chansons", "f", "song", "songs", THING, "writable", "audible", "abstract"),
    _n("radio", "radios", "f", "radio", "radios", THING, "audible"),
    _n("table", "tables", "f", "table", "tables", THING, "furniture"),
    _n("chaise", "chaises", "f", "chair", "chairs", THING, "furniture"),
    _n("canapé", "canapés", "m", "sofa", "sofas", THING, "furniture"),
    _n("rideau", "rideaux", "m", "curtain", "curtains", THING, "openable"),
    _n("fenêtre", "fenêtres", "f", "window", "windows", THING, "openable"),
    _n("clé", "clés", "f", "key", "keys", THING),
    _n("sac", "sacs", "m", "bag", "bags", THING, "openable", "container"),
    _n("boîte", "boîtes", "f", "box", "boxes", THING, "openable", "container"),
    _n("téléphone", "téléphones", "m", "phone", "phones", THING),
    _n("ordinateur", "ordinateurs", "m", "computer", "computers", THING),
    _n("tasse", "tasses", "f", "cup", "cups", THING, "container"),
    _n("verre", "verres", "m", "glass", "glasses", THING, "container"),
    _n("stylo", "stylos", "m", "pen", "pens", THING),
    # clothes
    _n("chapeau", "chapeaux", "m", "hat", "hats", CLOTHES),
    _n("chemise", "chemises", "f", "shirt", "shirts", CLOTHES),
    _n("robe", "robes", "f", "dress", "dresses", CLOTHES),
    _n("manteau", "manteaux", "m", "coat", "coats", CLOTHES),
    # vehicles
    _n("vélo", "vélos", "m", "bike", "bikes", VEHICLE),
    _n("voiture", "voitures", "f", "car", "cars", VEHICLE, "container"),
    _n("train", "trains", "m", "train", "trains", VEHICLE, "container"),
    _n("bateau", "bateaux", "m", "boat", "boats", VEHICLE, "container"),
    _n("avion", "avions", "m", "plane", "planes", VEHICLE, "container"),
    # places
    _n("maison", "maisons", "f", "house", "houses", PLACE, "building", "home"),
    _n("école", "écoles", "f", "school", "schools", PLACE, "building"),
    _n("marché", "marchés", "m", "market", "markets", PLACE),
    _n("gare", "gares", "f", "station", "stations", PLACE, "building"),
    _n("parc", "parcs", "m", "park", "parks", PLACE),
    _n("jardin", "jardins", "m", "garden", "gardens", PLACE),
    _n("plage", "plages", "f", "beach", "beaches", PLACE),
    _n("hôpital", "hôpitaux", "m", "hospital", "hospitals", PLACE, "building"),
    _n("bureau", "bureaux", "m", "office", "offices", PLACE, "building"),
    _n("restaurant", "restaurants", "m", "restaurant", "restaurants", PLACE, "building"),
    _n("musée", "musées", "m", "museum", "museums", PLACE, "building"),
    _n("cuisine", "cuisines", "f", "kitchen", "kitchens", PLACE),
    _n("chambre", "chambres", "f", "bedroom", "bedrooms", PLACE),
    _n("ville", "villes", "f", "city", "cities", PLACE, "home"),
    _n("magasin", "magasins", "m", "shop", "shops", PLACE, "building"),
    _n("hôtel", "hôtels", "m", "hotel", "hotels", PLACE, "building", "home"),
)

# Cities take no article: "j'habite à paris" -> "i live in paris".
CITIES: dict[str, str] = {
    "paris": "paris", "londres": "london", "rome": "rome", "berlin": "berlin",
    "madrid": "madrid", "tokyo": "tokyo", "amsterdam": "amsterdam", "lyon": "lyon",
}

_ALL_CONCRETE = frozenset({PERSON, ANIMAL, THING, CLOTHES, VEHICLE, PLACE})
_OBJECTS = frozenset({THING, CLOTHES, VEHICLE})
_COLOURED = frozenset({ANIMAL, THING, CLOTHES, VEHICLE, FOOD})
_LIVING = frozenset({PERSON, ANIMAL})


def _a(ms: str, fs: str, mp: str, fp: str, en: str, classes: frozenset[str], **kw: object
       ) -> Adjective:
    return Adjective((ms, fs, mp, fp), en, classes, **kw)  # type: ignore[arg-type]


ADJECTIVES: tuple[Adjective, ...] = (
    # preposed: these stand before the noun in French ("un petit chat")
    _a("petit", "petite", "petits", "petites", "small", _ALL_CONCRETE | {FOOD},
       preposed=True),
    _a("grand", "grande", "grands", "grandes", "big", _ALL_CONCRETE | {FOOD}, preposed=True,
       en_person="tall"),
    _a("jeune", "jeune", "jeunes", "jeunes", "young", _LIVING, preposed=True),
    _a("vieux", "vieille", "vieux", "vieilles", "old", _ALL_CONCRETE, preposed=True,
       before_vowel="vieil"),
    _a("bon", "bonne", "bons", "bonnes", "good", frozenset({PERSON, FOOD, DRINK, THING}),
       preposed=True),
    _a("mauvais", "mauvaise", "mauvais", "mauvaises", "bad",
       frozenset({PERSON, FOOD, DRINK, THING}), preposed=True),
    _a("beau", "belle", "beaux", "belles", "beautiful",
       _ALL_CONCRETE, preposed=True, before_vowel="bel"),
    _a("nouveau", "nouvelle", "nouveaux", "nouvelles", "new",
       _OBJECTS | {PERSON, PLACE}, preposed=True, before_vowel="nouvel"),
    # postposed: these follow the noun ("un chat noir")
    _a("noir", "noire", "noirs", "noires", "black", _COLOURED - {FOOD}),
    _a("blanc", "blanche", "blancs", "blanches", "white", _COLOURED - {FOOD}),
    _a("rouge", "rouge", "rouges", "rouges", "red", _COLOURED),
    _a("vert", "verte", "verts", "vertes", "green", _COLOURED),
    _a("bleu", "bleue", "bleus", "bleues", "blue", _COLOURED - {FOOD}),
    _a("jaune", "jaune", "jaunes", "jaunes", "yellow", _COLOURED),
    _a("français", "française", "français", "françaises", "french",
       frozenset({PERSON, FOOD, VEHICLE, THING})),
    _a("italien", "italienne", "italiens", "italiennes", "italian",
       frozenset({PERSON, FOOD, VEHICLE, THING})),
    _a("intelligent", "intelligente", "intelligents", "intelligentes", "smart", _LIVING),
    _a("heureux", "heureuse", "heureux", "heureuses", "happy", _LIVING),
    _a("triste", "triste", "tristes", "tristes", "sad", _LIVING),
    _a("fatigué", "fatiguée", "fatigués", "fatiguées", "tired", _LIVING),
    _a("rapide", "rapide", "rapides", "rapides", "fast", frozenset({ANIMAL, VEHICLE})),
    _a("lourd", "lourde", "lourds", "lourdes", "heavy", _OBJECTS),
    _a("chaud", "chaude", "chauds", "chaudes", "hot", frozenset({FOOD, DRINK})),
    _a("froid", "froide", "froids", "froides", "cold", frozenset({FOOD, DRINK, PLACE})),
    _a("délicieux", "délicieuse", "délicieux", "délicieuses", "delicious",
       frozenset({FOOD, DRINK})),
    _a("cher", "chère", "chers", "chères", "expensive", _OBJECTS | {FOOD}),
    _a("célèbre", "célèbre", "célèbres", "célèbres", "famous", frozenset({PERSON, PLACE})),
    _a("cassé", "cassée", "cassés", "cassées", "broken", _OBJECTS),
)

# Postposed adjectives that may follow a preposed one in the same noun phrase
# ("un petit chat noir" -> "a small black cat"): English puts them after size/age words too.
STACKABLE = frozenset({"noir", "blanc", "rouge", "vert", "bleu", "jaune", "français",
                       "italien"})


@dataclass(frozen=True)
class Profession:
    """A profession noun: after *être* French drops the article, English keeps a/an."""

    forms: tuple[str, str, str, str]  # ms, fs, mp, fp
    en: str
    en_pl: str


PROFESSIONS: tuple[Profession, ...] = (
    Profession(("étudiant", "étudiante", "étudiants", "étudiantes"), "student", "students"),
    Profession(("médecin", "médecin", "médecins", "médecins"), "doctor", "doctors"),
    Profession(("professeur", "professeure", "professeurs", "professeures"), "teacher",
               "teachers"),
    Profession(("ingénieur", "ingénieure", "ingénieurs", "ingénieures"), "engineer",
               "engineers"),
    Profession(("chanteur", "chanteuse", "chanteurs", "chanteuses"), "singer", "singers"),
    Profession(("musicien", "musicienne", "musiciens", "musiciennes"), "musician",
               "musicians"),
    Profession(("infirmier", "infirmière", "infirmiers", "infirmières"), "nurse", "nurses"),
    Profession(("acteur", "actrice", "acteurs", "actrices"), "actor", "actors"),
)


def _er(stem: str, nous: str | None = None) -> tuple[str, str, str, str, str, str]:
    """Present tense of a regular -er verb from its stem (nous form given when it differs)."""
    return (stem + "e", stem + "es", stem + "e", nous or stem + "ons", stem + "ez",
            stem + "ent")


def _v(infinitive: str, forms: tuple[str, str, str, str, str, str], en: str, en_3sg: str,
       objects: frozenset[str] = frozenset(), *by_class: tuple[str, str, str]) -> Verb:
    return Verb(infinitive, forms, en, en_3sg, objects, tuple(by_class))


ETRE = _v("être", ("suis", "es", "est", "sommes", "êtes", "sont"), "be", "is")
AVOIR = _v("avoir", ("ai", "as", "a", "avons", "avez", "ont"), "have", "has",
           _ALL_CONCRETE - {PLACE} | {FOOD})
ALLER = _v("aller", ("vais", "vas", "va", "allons", "allez", "vont"), "go", "goes")
VENIR = _v("venir", ("viens", "viens", "vient", "venons", "venez", "viennent"), "come",
           "comes")
HABITER = _v("habiter", _er("habit"), "live", "lives")

_SEEN = _ALL_CONCRETE
TRANSITIVE_VERBS: tuple[Verb, ...] = (
    _v("aimer", _er("aim"), "like", "likes", _ALL_CONCRETE | {FOOD, DRINK}),
    _v("regarder", _er("regard"), "look at", "looks at", _SEEN),
    _v("voir", ("vois", "vois", "voit", "voyons", "voyez", "voient"), "see", "sees", _SEEN),
    _v("manger", _er("mang", "mangeons"), "eat", "eats", frozenset({FOOD})),
    _v("boire", ("bois", "bois", "boit", "buvons", "buvez", "boivent"), "drink", "drinks",
       frozenset({DRINK})),
    _v("acheter", ("achète", "achètes", "achète", "achetons", "achetez", "achètent"), "buy",
       "buys", _OBJECTS | {FOOD, DRINK}),
    _v("vendre", ("vends", "vends", "vend", "vendons", "vendez", "vendent"), "sell", "sells",
       _OBJECTS | {FOOD}),
    _v("prendre", ("prends", "prends", "prend", "prenons", "prenez", "prennent"), "take",
       "takes", _OBJECTS | {FOOD}),
    # porter: "wear" for clothes, "carry" for everything else
    _v("porter", _er("port"), "carry", "carries", _OBJECTS | _LIVING,
       (CLOTHES, "wear", "wears")),
    _v("chercher", _er("cherch"), "look for", "looks for", _SEEN),
    _v("trouver", _er("trouv"), "find", "finds", _SEEN),
    _v("laver", _er("lav"), "wash", "washes", _OBJECTS | {ANIMAL}),
    _v("ouvrir", _er("ouvr"), "open", "opens", frozenset({"openable"})),
    _v("fermer", _er("ferm"), "close", "closes", frozenset({"openable"})),
    _v("attendre", ("attends", "attends", "attend", "attendons", "attendez", "attendent"),
       "wait for", "waits for", frozenset({PERSON, VEHICLE})),
    _v("écouter", _er("écout"), "listen to", "listens to", frozenset({"audible"})),
    _v("lire", ("lis", "lis", "lit", "lisons", "lisez", "lisent"), "read", "reads",
       frozenset({"readable"})),
    _v("écrire", ("écris", "écris", "écrit", "écrivons", "écrivez", "écrivent"), "write",
       "writes", frozenset({"writable"})),
    _v("visiter", _er("visit"), "visit", "visits", frozenset({PLACE})),
    _v("aider", _er("aid"), "help", "helps", frozenset({PERSON})),
)

# Intransitive verbs, followed by an optional prepositional phrase.
INTRANSITIVE_VERBS: tuple[Verb, ...] = (
    _v("dormir", ("dors", "dors", "dort", "dormons", "dormez", "dorment"), "sleep", "sleeps"),
    _v("travailler", _er("travaill"), "work", "works"),
    _v("jouer", _er("jou"), "play", "plays"),
    _v("nager", _er("nag", "nageons"), "swim", "swims"),
    _v("courir", ("cours", "cours", "court", "courons", "courez", "courent"), "run", "runs"),
)

# Subject pronouns: (French, English, person index 0-5, feminine or None = either, plural)
PRONOUNS: tuple[tuple[str, str, int, bool | None, bool], ...] = (
    ("je", "i", 0, None, False),
    ("tu", "you", 1, None, False),
    ("il", "he", 2, False, False),
    ("elle", "she", 2, True, False),
    ("nous", "we", 3, None, True),
    ("vous", "you", 4, None, True),
    ("ils", "they", 5, False, True),
    ("elles", "they", 5, True, True),
)
EN_BE = ("am", "are", "is", "are", "are", "are")

# Possessive determiners: (masculine sg / feminine before vowel, feminine sg, plural, English)
POSSESSIVES: tuple[tuple[str, str, str, str], ...] = (
    ("mon", "ma", "mes", "my"),
    ("ton", "ta", "tes", "your"),
    ("notre", "notre", "nos", "our"),
    ("votre", "votre", "vos", "your"),
    ("leur", "leur", "leurs", "their"),
)

NUMBERS: tuple[tuple[str, str], ...] = (
    ("deux", "two"), ("trois", "three"), ("quatre", "four"), ("cinq", "five"),
    ("six", "six"), ("sept", "seven"), ("huit", "eight"), ("neuf", "nine"), ("dix", "ten"),
)

# Locative prepositions: French words, English words, noun tags/classes they accept.
# "de" prepositions contract with the article: près du marché, à côté des chaises.
LOCATIVES: tuple[tuple[tuple[str, ...], tuple[str, ...], frozenset[str]], ...] = (
    (("dans",), ("in",), frozenset({PLACE, "container"})),
    (("sous",), ("under",), frozenset({"furniture", VEHICLE})),
    (("sur",), ("on",), frozenset({"furniture"})),
    (("devant",), ("in", "front", "of"), frozenset({"building", "furniture", VEHICLE,
                                                    PERSON})),
    (("derrière",), ("behind",), frozenset({"building", "furniture", VEHICLE, PERSON})),
    (("près", "de"), ("near",), frozenset({PLACE, "furniture", VEHICLE, PERSON})),
    (("à", "côté", "de"), ("next", "to"), frozenset({"building", "furniture", VEHICLE,
                                                     PERSON})),
    (("loin", "de"), ("far", "from"), frozenset({PLACE})),
)

VOWELS = frozenset("aeiouyéèêëàâîïôûœh")
ASPIRATED = frozenset({"huit"})  # the only aspirated h in the lexicon: "de huit", not "d'huit"


def starts_with_vowel(word: str) -> bool:
    """True if French elision applies before ``word`` (l'homme, but de huit)."""
    return word[:1] in VOWELS and word not in ASPIRATED


def lexicon_words() -> tuple[set[str], set[str]]:
    """All French and English word forms the lexicon can produce (for counting its size)."""
    fr: set[str] = set()
    en: set[str] = set()
    for noun in NOUNS:
        fr.update(w for w in (noun.fr, noun.fr_pl) if w)
        en.update(w for w in (noun.en, noun.en_pl) if w)
    for adj in ADJECTIVES:
        fr.update(adj.forms)
        fr.update(w for w in (adj.before_vowel,) if w)
        en.update(w for w in (adj.en, adj.en_person) if w)
    for prof in PROFESSIONS:
        fr.update(prof.forms)
        en.update((prof.en + " " + prof.en_pl).split())
    for verb in (ETRE, AVOIR, ALLER, VENIR, HABITER, *TRANSITIVE_VERBS, *INTRANSITIVE_VERBS):
        fr.update(verb.forms)
        en.update((verb.en + " " + verb.en_3sg).split())
        for _, base, third in verb.en_by_class:
            en.update((base + " " + third).split())
    fr.update(CITIES)
    en.update(CITIES.values())
    return fr, en


def _lexical_verbs() -> tuple[Verb, ...]:
    """Verbs with a meaning of their own: every verb but the auxiliaries être and avoir."""
    return (ALLER, VENIR, HABITER, *TRANSITIVE_VERBS, *INTRANSITIVE_VERBS)


def content_translations() -> dict[str, frozenset[str]]:
    """English content word -> the French word forms that the grammar translates into it.

    Content words are nouns, adjectives, professions, cities and the head word of every verb
    but être and avoir (*look* of *look at*); articles, pronouns, prepositions, numbers and
    auxiliaries are function words and are left out. An English word may come from several
    French forms (*friend*: ami, amie, and every form of an adjective).
    """
    table: dict[str, set[str]] = {}

    def add(en: str | None, *fr: str | None) -> None:
        if en:
            table.setdefault(en, set()).update(f for f in fr if f)

    for noun in NOUNS:
        add(noun.en, noun.fr)
        add(noun.en_pl, noun.fr_pl)
    for adj in ADJECTIVES:
        for en in (adj.en, adj.en_person):
            add(en, *adj.forms, adj.before_vowel)
    for prof in PROFESSIONS:
        add(prof.en, *prof.forms[:2])
        add(prof.en_pl, *prof.forms[2:])
    for fr_city, en_city in CITIES.items():
        add(en_city, fr_city)
    for verb in _lexical_verbs():
        english = [(verb.en, verb.en_3sg)] + [(b, t) for _, b, t in verb.en_by_class]
        for base, third in english:
            add(base.split()[0], *verb.forms)
            add(third.split()[0], *verb.forms)
    return {en: frozenset(fr) for en, fr in table.items()}


_CONTENT = content_translations()


def align_content_words(src_tokens: list[str], tgt_tokens: list[str]
                        ) -> list[tuple[int, int]]:
    """Word alignment of a fr -> en sentence pair: ``(target index, source index)`` pairs.

    One pair for each English content word (see :func:`content_translations`) whose French
    counterpart is unambiguous: exactly one source token is a form that translates it. Words
    whose counterpart occurs twice or not at all (*the black cat sees a black dog*) are left
    out rather than guessed. Indices are token positions (``labformer.data.tokenize``).
    """
    pairs = []
    for i, word in enumerate(tgt_tokens):
        forms = _CONTENT.get(word)
        if forms is None:
            continue
        where = [j for j, token in enumerate(src_tokens) if token in forms]
        if len(where) == 1:
            pairs.append((i, where[0]))
    return pairs
