"""Pairs written outside the generator: ``training/data/pairs/pairs-<author>.jsonl``.

Each line is one (old, new) pair a person wrote, with its relation and the attribute and
holder the old statement is about (``{"old", "new", "label", "attribute", "holder", "kind",
"author"}``); chat pairs (``chat-<author>.jsonl``: a friend's later turn against an earlier
one, mostly restating it) name no attribute. The authors wrote blind: none saw another's file, any evaluation file or the
management generator, so these pairs measure what the generator's own split cannot.

`split_by_attribute` splits them by attribute, not by pair: every pair of one attribute
lands in the same part, so the test part holds attributes the head never trained on (an
attribute-held-out split). The part of an attribute is a hash of its normalised name, the
same on every machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memsdk.policies.relations import Relation, relation_text

__all__ = ["WrittenPair", "read_written", "split_by_attribute", "DATA_DIR"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "pairs"

#: a speaker name per pair (both texts are the same user's), as the extractor's header writes it
_SPEAKERS = ("Alex", "Sam", "Jordan", "Priya", "Tomasz", "Aiko", "Lena", "Kofi", "Maria", "Chen")


@dataclass(frozen=True)
class WrittenPair:
    """A pair as the pair head reads it (``new``, ``old`` behind a speaker header, ``label``),
    and where it came from."""

    new: str
    old: str
    label: Relation
    attribute: str | None
    author: str
    kind: str

    @property
    def split_key(self) -> str:
        """What decides the part: the attribute, else (chat) the earlier turn."""
        return self.attribute if self.attribute is not None else f"turn: {relation_text(self.old)}"


def _part(key: str) -> float:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


def read_written(paths: Sequence[str | Path]) -> list[WrittenPair]:
    """Every pair of the files, each text behind its speaker's header."""
    out = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            # one speaker per earlier statement: the pairs that share it are one user's
            speaker = _SPEAKERS[int(_part(row["old"]) * len(_SPEAKERS)) % len(_SPEAKERS)]
            attribute = " ".join(str(row["attribute"]).lower().split()) if row.get("attribute") else None
            out.append(WrittenPair(f"{speaker}: {row['new']}", f"{speaker}: {row['old']}", Relation(row["label"]), attribute, str(row["author"]), str(row.get("kind", ""))))
    return out


def split_by_attribute(pairs: Sequence[WrittenPair], train: float, val: float) -> tuple[list[WrittenPair], list[WrittenPair], list[WrittenPair]]:
    """(train, val, test) with each attribute's pairs in one part (`WrittenPair.split_key`): its hash below
    ``train`` trains, below ``train + val`` validates, the rest is the held-out test."""
    parts: tuple[list[WrittenPair], list[WrittenPair], list[WrittenPair]] = ([], [], [])
    for p in pairs:
        at = _part(p.split_key)
        parts[0 if at < train else 1 if at < train + val else 2].append(p)
    return parts
