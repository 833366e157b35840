"""Personal data by kind: the values a text holds, and the kinds or topics a forget request names.

Users ask to forget a *kind* of data, not its text: "please forget my old address", "don't
keep my card number", "I'd rather you didn't store anything about my diagnosis". Three pure
answers let the forget path act on that: `detect` says which kinds a memory holds a value of
(`values`: and which values),
`kinds_named` which kinds a request's subject names, and `topic_terms` / `states_topic` which
word stems state a sensitive topic the request names. The forget rules
(`memsdk.pipeline.forget`) match a memory on these answers or on the request's own words,
with no embedding; the trained relevance head (`memsdk.pipeline.forget_head`) takes the kind
and topic matches as two of its features. This module does no I/O and imports nothing but
the standard library and `memsdk.dates`.

What `detect` catches (each has a test):
- PHONE: "+" international numbers ("+1 (415) 555-0134", "+44 7700 900123"), North American
  numbers with separators ("(415) 555-0134", "415.555.0134", "415 555 0134"), national numbers
  with a leading 0 and a space ("07700 900123", "06 12 34 56 78"), and any 7-15 digit run after
  a phone cue ("call me on 555-0134", "my number is 0612345678").
- EMAIL: the usual address pattern.
- POSTAL_ADDRESS: a house number, 1-3 capitalised words and a street word ("221B Baker Street",
  "12 Oak Ln"), lower-case too after an address cue ("i live at 12 oak street"); "apartment 4B",
  "apt 12", "my flat 3"; a UK postcode or a US ZIP after an address cue ("my postcode is SW1A
  1AA", "zip code 94110").
- BIRTH_DATE: a date after a birth cue ("born on 3 March 1990", "my birthday is May 5", "DOB
  1990-03-03"), or a bare year after "born" ("born in 1990": a birth year is part of it).
- CARD_NUMBER: 16-19 digits in groups of four, or Amex-style 4-6-5, Luhn-valid; 13-19 plain
  digits, Luhn-valid, after a card cue.
- ACCOUNT_NUMBER: an IBAN that passes its mod-97 check; 6-17 digits after "account", "sort
  code", "routing", "IBAN" or "BSB" ("sort code 12-34-56", "account number 12345678").
- GOVERNMENT_ID: a US SSN ("123-45-6789", the never-issued 000/666/9xx areas aside); an ID-like
  token with at least 4 digits after an SSN, passport, national insurance, driver's licence or
  ID-number cue ("passport number X1234567", "NI number QQ123456C").
What it misses: values whose cue comes after them ("0612345678 is my mobile"), or more than
~48 characters or a sentence before them; unformatted numbers without a cue; spelled-out
numbers ("five five five..."); non-Latin scripts; addresses without a house number ("Baker
Street, London") and a home city alone ("I live in Boston" is not a postal address). It
fires on a street-shaped phrase that is not an address ("In 2019 Main Street flooded") and
on someone else's data: it says what the text holds, not whose it is.

What `kinds_named` catches: a data-kind noun phrase at the head of the subject, or of one of
its parts split at "and" / "or" / commas, after framing words ("anything about", "my old",
"what I said about", "could you not keep"): "my phone number anywhere", "my home address, I
don't want it stored", "e-mail address", "DOB", "card details", "bank details", "SSN".
"where I live" names POSTAL_ADDRESS: the user wants the address gone, and a home city in
prose is left to the match on the request's own words and to the trained reader where one
is served (`memsdk.pipeline.forget_request`). "contact details" names PHONE, EMAIL and
POSTAL_ADDRESS; "personal details" / "personal info" name every kind (a card number is
personal data too, and forgetting errs on the side of forgetting); "payment details" names
CARD_NUMBER and ACCOUNT_NUMBER; "the email I sent about X" is a message and names nothing.
What it misses: a kind that is not the head ("that I broke my phone", "my mum's phone
number"), and it takes "my phone" as a phone number even where the device is meant ("my
phone broke").

What `topic_terms` catches: a topic word at the head of a part (one free qualifier allowed:
"my cancer diagnosis"), for health, money, relationships, religion, politics, sexuality,
pregnancy, job, children and legal trouble; a part that names a data kind is about that kind
("my work email" is not the job topic). The stems are conservative: words that state the
topic in ordinary talk, not words that merely can ("doctor" states health; "work" alone
states nothing, "at work" states a job). What it misses: topics outside the lexicon, and
memories that state a topic without its words ("I've been seeing someone at the clinic" is
caught, "I had a rough week with my head" is not). A relationship stated with a name ("I've
been seeing Mia", "been going out with Elif") is caught, "going out with friends" and
"seeing Dr Osei" are not; an outing with a named friend ("went out with Tom") is not taken
for one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import NamedTuple

from memsdk.dates import MONTH

__all__ = ["DataKind", "detect", "values", "kinds_named", "topic_terms", "states_topic"]


class DataKind(StrEnum):
    PHONE = "phone"
    EMAIL = "email"
    POSTAL_ADDRESS = "postal_address"
    BIRTH_DATE = "birth_date"
    CARD_NUMBER = "card_number"
    ACCOUNT_NUMBER = "account_number"  # bank account, IBAN, routing number, sort code
    GOVERNMENT_ID = "government_id"  # SSN, passport, national insurance, driver's licence


# --- detect -----------------------------------------------------------------------------


class _Rule(NamedTuple):
    kind: DataKind
    value: re.Pattern[str]
    cue: re.Pattern[str] | None  # must occur shortly before the value, in the same sentence
    check: Callable[[str], bool] | None


def _digits(value: str) -> int:
    return sum(c.isdigit() for c in value)


_DATE_SHAPE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}")


def _digit_span(lo: int, hi: int, *, dates: bool = False) -> Callable[[str], bool]:
    # a cue such as "phone" or "passport" can precede a date ("my passport expires 2030-01-01");
    # a sort code has a date's shape (12-34-56), so the account rule takes dates
    return lambda value: lo <= _digits(value) <= hi and (dates or not _DATE_SHAPE.fullmatch(value))


def _luhn(value: str) -> bool:
    digits = [int(c) for c in reversed(value) if c.isdigit()]
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(digits))
    return 13 <= len(digits) <= 19 and total % 10 == 0


def _iban(value: str) -> bool:
    compact = value.replace(" ", "")
    rotated = compact[4:] + compact[:4]
    return 15 <= len(compact) <= 34 and int("".join(str(int(c, 36)) for c in rotated)) % 97 == 1


# a value is a whole token, not the tail or head of a longer number: "$1,200", "3:30" and
# "v2.0.1" never yield a digit run, while "ph:555-0134" and "email:sam@x.org" still do
_START = r"(?<![\w+$£€#])(?<!\d[.,/:-])"
_END = r"(?![\w%]|[.,/:-]\d)"
_MONTH = rf"(?i:{MONTH})\.?"  # case-insensitive here only: the rules are not (a street name is capitalised)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_DATE = rf"\d{{4}}[-/.]\d{{1,2}}[-/.]\d{{1,2}}|\d{{1,2}}[-/.]\d{{1,2}}[-/.]\d{{2,4}}|{_DAY}(?: of)? {_MONTH}(?:,? \d{{4}})?|{_MONTH} {_DAY}(?!\d)(?:,? \d{{4}})?|{_MONTH},? \d{{4}}|\d{{1,2}}/\d{{1,2}}"
_STREET = r"(?i:street|st|avenue|ave|road|rd|lane|ln|drive|dr|boulevard|blvd|way|court|ct|place|pl|terrace|close|crescent|cres|square|sq|parkway|pkwy|highway|hwy|gardens|grove|mews)\b\.?"
_DIGIT_RUN = r"\+?\(?\d[\d ().-]{4,22}\d"

_PHONE_CUE = r"\b(?:(?:tele|cell|mobile|home|work)?phone|mobile|cell|tel|ph|landline|whatsapp|fax|sms|text me|call me|ring me|reach me|my (?:new |old |home |work |mobile |cell )?number)\b"
_ADDRESS_CUE = r"\b(?:address|post ?code|postal code|zip|live[sd]?|living|moved|move|ship|deliver|send|mail|home is)\b"
_BIRTH_CUE = r"\b(?:born|birth ?day|b-?day|date of birth|birth ?date|d\.?o\.?b)\b"
_CARD_CUE = r"\b(?:card|visa|mastercard|amex|american express)\b"
_ACCOUNT_CUE = r"\b(?:account|acct|a/c|sort ?code|routing|aba|bsb|iban)\b"
_ID_CUE = r"\b(?:ssn|social security|passport|national insurance|ni|nino|driv(?:er'?s|ing) licen[cs]e|licen[cs]e (?:number|no)|(?:national|government|tax) id|id (?:number|no))\b"

_K = DataKind
_RULES_SOURCE: tuple[tuple[DataKind, str, str | None, Callable[[str], bool] | None], ...] = (
    (_K.PHONE, r"\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,4}){2,5}", None, _digit_span(8, 15)),
    (_K.PHONE, r"(?:\(\d{3}\) ?\d{3}[ .-]|\d{3}([ .-])\d{3}\1)\d{4}", None, None),
    (_K.PHONE, r"0\d{2,4}[ -]\d{3,4}(?:[ -]?\d{3,4})?|0\d(?:[ .]\d{2}){4}", None, _digit_span(10, 11)),
    (_K.PHONE, _DIGIT_RUN, _PHONE_CUE, _digit_span(7, 15)),
    (_K.EMAIL, r"[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}", None, None),
    (_K.POSTAL_ADDRESS, rf"\d{{1,5}}[A-Za-z]?,? (?:[A-Z][\w'.-]* ){{1,3}}{_STREET}", None, None),
    (_K.POSTAL_ADDRESS, rf"\d{{1,5}}[A-Za-z]?,? (?:[A-Za-z][\w'.-]* ){{1,3}}{_STREET}", _ADDRESS_CUE, None),
    # "flat" needs a possessive or a preposition: "the tyre went flat 3 times" is no address
    (_K.POSTAL_ADDRESS, r"\b(?i:apartment|apt\.?|(?:my|our|in|at) flat) ?#? ?\d{1,4}[A-Za-z]?\b(?! (?i:blocks?|minutes?|mins?|miles?|km|floors?|doors?|stops?|hours?|days?|times?|people)\b)", None, None),
    # a UK postcode needs a cue: "MP3 4GB" has the same shape
    (_K.POSTAL_ADDRESS, r"\b[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}\b", _ADDRESS_CUE, None),
    (_K.POSTAL_ADDRESS, r"\d{5}(?:-\d{4})?", _ADDRESS_CUE, None),
    (_K.BIRTH_DATE, _DATE, _BIRTH_CUE, None),
    # a bare year only after "born": "I celebrated my birthday in 2019" gives no birth year
    (_K.BIRTH_DATE, r"(?:1[89]|20)\d{2}", r"\bborn\b", None),
    (_K.CARD_NUMBER, r"\d{4}([ -])\d{4}\1\d{4}\1\d{4}(?:\1\d{1,3})?|\d{4}([ -])\d{6}\2\d{4,5}", None, _luhn),
    (_K.CARD_NUMBER, r"\d{13,19}", _CARD_CUE, _luhn),
    (_K.ACCOUNT_NUMBER, r"\b[A-Z]{2}\d{2}(?: ?[A-Z\d]{4}){2,7}(?: ?[A-Z\d]{1,3})?\b", None, _iban),
    (_K.ACCOUNT_NUMBER, r"\d[\d -]{4,20}\d", _ACCOUNT_CUE, _digit_span(6, 17, dates=True)),
    (_K.GOVERNMENT_ID, r"(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}", None, None),
    (_K.GOVERNMENT_ID, r"(?=[A-Za-z\d-]*\d)[A-Za-z\d-]{6,18}|[A-Za-z]{2}(?: \d{2}){3} [A-Da-d]", _ID_CUE, _digit_span(4, 18)),
)
_RULES = tuple(
    _Rule(kind, re.compile(_START + f"(?:{value})" + _END), re.compile(cue, re.I) if cue else None, check)
    for kind, value, cue, check in _RULES_SOURCE
)
_CUE_WINDOW = 48
# a full stop after "tel" or "no" abbreviates, it does not end the sentence ("tel. 0612 34 56 78")
_SENTENCE_BREAK = re.compile(r"[!?\n]|(?<!\btel)(?<!\bno)(?<!\bnr)\.\s", re.I)


def _lead_in(text: str, start: int) -> str:
    """The text a cue must sit in: up to `_CUE_WINDOW` characters before a value, same sentence."""
    return _SENTENCE_BREAK.split(text[max(0, start - _CUE_WINDOW) : start])[-1]


def _found(rule: _Rule, text: str) -> Iterator[re.Match[str]]:
    for m in rule.value.finditer(text):
        if rule.cue is not None and not rule.cue.search(_lead_in(text, m.start())):
            continue
        if rule.check is None or rule.check(m.group()):
            yield m


def detect(text: str) -> frozenset[DataKind]:
    """The kinds of personal data ``text`` holds a value of (see the module docstring)."""
    return frozenset(rule.kind for rule in _RULES if next(_found(rule, text), None) is not None)


def values(text: str) -> list[tuple[DataKind, str]]:
    """The values of personal data ``text`` holds, each with its kind, in the order they
    start (what `detect` finds, with the text it found)."""
    found = sorted(((m.start(), rule.kind, m.group()) for rule in _RULES for m in _found(rule, text)), key=lambda f: f[0])
    return [(kind, value) for _, kind, value in found]


# --- kinds_named and topic_terms ----------------------------------------------------------

# Words that frame a request without naming its subject: what a kind or topic may follow and
# still be the head of the subject ("could you not keep my old phone number anywhere").
_FRAME_WORDS = (
    r"all|any|anything|everything|every|each|stuff|things?|bits?|parts?|details?|info(?:rmation)?|facts?"
    r"|the|a|an|my|our|your|mine|me|it|this|that|these|those|of|about|on|in|regarding|concerning|re|around"
    r"|related to|relating to|to do with|with|to|from|you know|you have|you've got"
    r"|(?:what )?(?:i|we) (?:said|told you|mentioned|shared|gave you)|memor(?:y|ies)|records?|notes?|cop(?:y|ies)|mentions?"
    r"|please|could|can|would|will|you|not|don't|dont|do|stop|never|rather|i'd|didn't|did|just|also|even|ever|again|anymore|now"
    r"|keep(?:ing)?|kept|stor(?:e|ed|ing)|sav(?:e|ed|ing)|remember(?:ing)?|hold(?:ing)?|retain|track|log|forget(?:ting)?"
    r"|delete|erase|remove|wipe|clear|purge|drop|get rid of|lose"
    r"|old|new|previous|former|current|latest|recent|home|work|personal|full|exact|real|actual|other|second|primary|main|own"
)
_FRAME_WORD = re.compile(rf"(?:{_FRAME_WORDS})(?![\w'])[\s,:;\"()-]*", re.I)
_ALL = frozenset(DataKind)
_NAMES_SOURCE: tuple[tuple[frozenset[DataKind], str], ...] = (
    (frozenset({_K.PHONE}), r"(?:tele|cell|mobile)?phones?(?: numbers?)?|mobiles?|cell(?: numbers?)?|landline|whatsapp|(?:contact )?numbers?(?! of)"),
    # "the email I sent about the party" is a message, not an address
    (frozenset({_K.EMAIL}), r"e-?mail address(?:es)?|e-?mails?(?! (?:i|you|we|he|she|they|that|which|about|from|to|with)\b)"),
    (frozenset({_K.POSTAL_ADDRESS}), r"(?:postal |street |mailing |physical |delivery |shipping |billing )?address(?:es)?|post ?codes?|postal codes?|zip(?: ?codes?)?|where (?:i|we) (?:live|stay|reside)|(?:house|flat|apartment) numbers?"),
    # "my birthday party" is an event: the date of birth is named only when the day itself is
    (frozenset({_K.BIRTH_DATE}), r"birth ?days?(?! (?:party|parties|cards?|presents?|gifts?|cake|plans|dinner|trip))|b-?day|date of birth|birth ?date|birth year|year of birth|d\.?o\.?b\.?|when (?:i was|i'm|i am) born"),
    (frozenset({_K.CARD_NUMBER}), r"(?:(?:credit|debit|bank|payment) )?cards?(?: (?:numbers?|details|info(?:rmation)?|no\.?))?|cvv|cvc"),
    (frozenset({_K.ACCOUNT_NUMBER}), r"bank(?:ing)? (?:details|accounts?|info(?:rmation)?|numbers?)|account (?:numbers?|no\.?|details)|iban|sort ?codes?|routing(?: numbers?)?|bsb"),
    (frozenset({_K.GOVERNMENT_ID}), r"ssns?|social security(?: numbers?)?|passports?(?: numbers?| details)?|national insurance(?: numbers?)?|ni numbers?|nino|driv(?:er'?s|ing) licen[cs]es?(?: numbers?)?|licen[cs]e numbers?|(?:national |government |state )?ids?(?: numbers?| cards?)?|tax (?:id|file number)|identity (?:cards?|documents?|numbers?)"),
    (frozenset({_K.PHONE, _K.EMAIL, _K.POSTAL_ADDRESS}), r"contact (?:details|info(?:rmation)?|data)|how to (?:reach|contact) me"),
    (frozenset({_K.CARD_NUMBER, _K.ACCOUNT_NUMBER}), r"(?:financial|payment|billing) (?:details|info(?:rmation)?|data)"),
    (_ALL, r"(?:personal|private|identifying|sensitive) (?:details|info(?:rmation)?|data)|personally identifiable information|pii"),
)
_NAMES = tuple((kinds, re.compile(rf"(?:{name})(?!\w)", re.I)) for kinds, name in _NAMES_SOURCE)
_PARTS = re.compile(r"\s*(?:[,;/&]|\b(?:and|or|plus|as well as)\b)\s*", re.I)


def _parts(about: str) -> list[str]:
    return [p for p in _PARTS.split(about.replace("\u2019", "'").strip()) if p]


def _heads(part: str) -> list[int]:
    """Where the head of ``part`` may start: at 0 and after each framing word that leads it.
    (One pattern walked here, rather than the framing words inside every kind's pattern,
    keeps the import fast: each would compile the long alternation again.)"""
    heads = [0]
    while m := _FRAME_WORD.match(part, heads[-1]):
        heads.append(m.end())
    return heads


def _leads(pattern: re.Pattern[str], part: str) -> bool:
    return any(pattern.match(part, head) for head in _heads(part))


def _names(part: str) -> frozenset[DataKind]:
    return frozenset().union(*(kinds for kinds, pattern in _NAMES if _leads(pattern, part)))


def kinds_named(about: str) -> frozenset[DataKind]:
    """The data kinds a forget request's subject names, e.g. "my phone number anywhere" ->
    {PHONE}; "anything about my diagnosis" names none (see the module docstring)."""
    return frozenset().union(*(_names(part) for part in _parts(about)))


# Each topic: the words a request names it by (at the head of a part) and the stems that
# state it in a memory. A stem of three letters or fewer must be a whole word ("son" is not
# "song"); longer ones are prefixes ("diagnos" covers "diagnosed" and "diagnosis"). NAME in
# a stem is a capitalised name, not a title: "been seeing Lina" states a relationship,
# "been seeing a therapist" and "been seeing Dr Osei" do not.
_TOPICS_SOURCE: tuple[tuple[str, str], ...] = (
    (r"diagnos\w*|health|illness(?:es)?|sickness|conditions?|medical \w+|medications?|medicines?|diseases?|disorders?|therapy|treatments?|symptoms?",
     "diagnos, disease, illness, medical, medicat, medicine, prescri, therap, treatment, symptom, doctor, gp, physician, hospital, clinic, surger, surgeon, "
     "chronic, disorder, syndrome, medical condition, health condition, heart condition, cancer, tumor, tumour, chemo, radiotherap, biopsy, mri, diabet, "
     "insulin, depression, depressed, antidepress, anxiety, panic attack, adhd, autis, asthma, bipolar, ocd, ptsd, schizo, anorexi, bulimi, epilep, "
     "migraine, arthritis, dementia, alzheimer, parkinson, hiv, psychiatr, mental health, rehab, addict, allerg, blood pressure, cholesterol, sick leave, "
     "vertigo, eczema, psoriasis, anemi, anaemi, apnea, apnoea, insomnia, hay fever, lupus, celiac, coeliac, crohn, colitis, ibs, gout, thyroid, "
     "hypertension, scoliosis, fibromyalgia, tinnitus, glaucoma, cataract, hepatitis, tuberculosis, pneumonia, bronchitis, sclerosis, endometriosis, "
     "pcos, concussion, physiotherap, chronic pain, injur"),
    (r"money|salar(?:y|ies)|income|debts?|financ\w*|wages?|pay|earnings|savings|loans?|mortgage|net worth|bankruptcy",
     "salar, income, debt, loan, mortgage, overdraft, bankrupt, paycheck, paycheque, payslip, pay rise, pay cut, wage, earnings, i earn, savings, "
     "net worth, credit score, taxes, tax return, pension, inheritance, financ"),
    # "who my cousin is dating": the question names the topic as well as the noun does
    (r"relationships?|divorce|dating|love life|sex life|partner|marriage|break-?up|ex|boyfriend|girlfriend|husband|wife|spouse|affair|separation"
     r"|who (?:[\w'-]+ ){0,4}?(?:dating|seeing|going out with|married to|engaged to|in a relationship with)",
     "relationship, divorc, separated, breakup, break-up, broke up, breaking up, dating, girlfriend, boyfriend, husband, wife, wives, spouse, partner, "
     "married, marriage, fianc, got engaged, my wedding, our wedding, ex, affair, cheated on, cheating on, tinder, romantic, lover, love life, sex life, "
     "been seeing NAME, started seeing NAME, stopped seeing NAME, been going out with NAME, started going out with NAME, moved in with NAME"),
    (r"religio\w*|faith|beliefs|spirituality|church",
     "religio, faith, church, mosque, synagogue, temple, pray, worship, spiritual, christian, catholic, protestant, evangelical, muslim, islam, "
     "jewish, judaism, hindu, buddhis, sikh, atheis, agnostic, mormon, bible, quran, koran, torah, ramadan, passover, kosher, halal, baptis"),
    (r"politic\w*|votes?|voting|political views",
     "politic, vote, voting, voter, ballot, election, elected, democrat, republican, labour party, labor party, tory, tories, green party, "
     "left-wing, right-wing, socialis, communis, libertarian, brexit"),
    (r"sexuality|sexual orientation|orientation|gender identity|coming out",
     "gay, lesbian, bisexual, queer, homosexual, heterosexual, asexual, pansexual, transgender, trans woman, trans man, non-binary, nonbinary, "
     "lgbt, sexuality, sexual orientation, gender identity, came out as, coming out as, coming out to, closeted"),
    (r"pregnan\w*|fertility|ivf|miscarriage",
     "pregnan, expecting a baby, trimester, ivf, fertility, infertil, miscarr, prenatal, antenatal, maternity, morning sickness, ultrasound, "
     "obstetric, midwife, abortion, trying for a baby, stillbirth"),
    (r"jobs?|work|career|employer|employment|boss|workplace|unemployment|layoff|redundancy|colleagues?",
     "job, jobs, employ, unemploy, career, boss, colleague, coworker, co-worker, workplace, at work, to work, from work, off work, after work, "
     "work at, work as, work for, working at, working as, working for, worked at, worked as, worked for, my manager, promotion, promoted, "
     "got fired, been fired, was fired, laid off, layoff, redundan, resign, internship, payroll, hired"),
    (r"kids?|child(?:ren)?|sons?|daughters?|parenting",
     "kids, my kid, our kid, child, son, sons, stepson, daughter, stepdaughter, toddler, my baby, our baby, newborn, infant, grandchild, grandkid, "
     "grandson, granddaughter, custody, daycare, nursery, kindergarten, preschool, parenting"),
    (r"legal \w+|arrests?|court(?: case)?|lawsuits?|criminal record|convictions?|police|prison|jail|trial",
     "arrest, charged with, convicted, conviction, criminal record, criminal charge, prison, jail, probation, parole, lawsuit, sued, suing, lawyer, attorney, solicitor, "
     "court case, in court, to court, court date, court order, courtroom, on trial, felony, misdemeanor, misdemeanour, dui, dwi, "
     "restraining order, police, indicted, indictment, plea deal"),
)
# a pronoun is never the free qualifier: "that I work late" is not the job topic
_QUALIFIER = r"(?:(?!(?:i|we|you|he|she|they|it)\b)[\w'-]+\s+)?"
_TOPICS = tuple(
    (re.compile(rf"{_QUALIFIER}(?:{triggers})(?!\w)", re.I), frozenset(stems.split(", ")))
    for triggers, stems in _TOPICS_SOURCE
)


def topic_terms(about: str) -> frozenset[str]:
    """The stems that state the sensitive topics a forget request's subject names, e.g.
    "anything about my diagnosis" -> the health stems; empty when it names none."""
    parts = [p for p in _parts(about) if not _names(p)]
    return frozenset().union(*(stems for pattern, stems in _TOPICS if any(_leads(pattern, p) for p in parts)))


#: a capitalised word that is not a title, case-sensitive inside `states_topic`'s re.I pattern
_NAME = r"(?-i:(?!(?:Dr|Doctor|Mr|Mrs|Ms|Miss|Prof|Professor)\b)[A-Z][\w'-]*)"


def states_topic(terms: frozenset[str], text: str) -> bool:
    """Whether ``text`` has a word starting with one of ``terms`` (case-insensitive; a term
    of three letters or fewer must be the whole word; NAME in a term is a capitalised name)."""
    if not terms:
        return False
    ordered = sorted(terms)  # a stable pattern, so `re`'s cache serves repeats
    prefixes = "|".join(_NAME.join(re.escape(piece.lower()) for piece in t.split("NAME")) for t in ordered if len(t) > 3)
    words = "|".join(re.escape(t) for t in ordered if len(t) <= 3)
    pattern = r"(?<!\w)(?:" + "|".join(filter(None, [prefixes, f"(?:{words})(?!\\w)" if words else ""])) + ")"
    return re.search(pattern, text, re.I) is not None
