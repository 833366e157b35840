"""Words as the policies without a model compare them: lower-cased tokens, a plural "s"
stripped, stopwords, and the "Speaker (on date): " header the heuristic extractor writes."""

from __future__ import annotations

import re

from memsdk.types import HEADER

__all__ = ["HEADER", "STOPWORDS", "split_words", "word_key"]

_WORD = re.compile(r"[\w']+")

STOPWORDS = frozenset(
    "a an the and or but of to in on at for with by from is are was were be been being do does did "
    "what when where who whom which why how i you he she it we they me him her us them my your his "
    "its our their this that these those there here as so if than then not no yes".split()
)


def word_key(word: str) -> str:
    # a plural/third-person "s" is the only inflection stripped: "lives" meets "live"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def split_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())
