"""What a new fact does to an old memory, as a small trained classifier over the pair.

Six relations (`Relation`), from the new text's side: it *supersedes* the old one (moved,
promoted, quit, switched: the old one was true and no longer is), *corrects* it (the old
one was never true: "the 10th, not the 3rd"), *duplicates* it, is *compatible* with it (a
second dog beside the first), is a request to forget it (*forget_target*), or is
*unrelated* to it.

Features of a pair (`pair_features`), with u and v the unit embeddings of the new and the
old text (`relation_text`: the "Speaker (on date): " header the heuristic extractor writes
is left out; who said it is a feature of its own):

    u * v                 the embedding dims on which the two agree (their sum is the cosine)
    |u - v|               and on which they differ
    cosine                u . v
    overlap_new           share of the new text's content words found in the old one
    overlap_old           share of the old text's content words found in the new one
    same_speaker          1 when both texts have a header naming the same speaker
    same_subject          1 when both are about the same person: the first kinship word
                          ("my brother ...") or, without one, the speaker's own ("I", "my")
    numbers_differ        1 when both hold numbers and not the same ones (a date, a time)
    values_shared         Jaccard of the two texts' values: numbers, e-mail addresses and
                          capitalised words inside a sentence (names, places, brands)
    new_value             1 when the new text holds a value the old one does not
    correction_cue        the new text says "not", "actually", "wrong", "fix", "sorry" ...
    change_cue            ... "now", "no longer", "just", "new", "moved", "quit", "since" ...
    addition_cue          ... "also", "too", "as well", "another", "second", "both" ...
    forget_cue            ... asks to forget, delete or not keep something
    length_ratio          log of the content-word counts' ratio, new over old, within +-3
    same_attribute        how likely the two state the same attribute of a person: sum over
                          `ATTRIBUTES` of a_k(u) a_k(v), a(x) = softmax(x . P / .05), P the
                          attributes' unit prototypes (`attribute_prototypes`)
    shared_attribute      max over the attributes of min(u . P_k, v . P_k): how close both
                          are to the attribute they are both closest to (a text that states
                          two, "my partner is coming to dinner on Sunday", keeps both)

The cue lexicons are plain English words for each kind of change, not any benchmark's
phrasings; the embedding blocks carry the rest. The attributes are what people say about
themselves (work, home, partner, diet, ...), each described in a few plain words: "I've been
going out with Rafael" and "my partner Dmitri is coming to dinner" share no content word and
a cosine of .26, and both are closest to the partner attribute. A head names the features it
was trained on in its manifest, and stores the prototypes it was trained with, so a head
trained before a feature was added still loads and sees what it saw.

The classifier (`PairClassifier`) is a small MLP head over those features: inputs
standardised with the training set's mean and scale, ReLU hidden layers, a softmax over the
relations. Its weights are a ``.npz`` and its description a ``manifest.json`` (the registry's
manifest fields; the head's own under ``config``) in one folder; inference is numpy only,
so serving it imports no torch. The trainer is ``memsdk_training.recipes.pair_classifier``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memsdk.policies.words import HEADER, STOPWORDS, split_words, word_key

__all__ = [
    "Relation",
    "RELATIONS",
    "LEXICAL",
    "ATTRIBUTES",
    "ATTRIBUTE_FEATURES",
    "reads_attributes",
    "HEAD_FORMAT",
    "WEIGHTS_FILE",
    "RelationModel",
    "PairClassifier",
    "relation_text",
    "speaker_of",
    "subject_of",
    "values_of",
    "lexical_features",
    "attribute_prototypes",
    "same_attribute",
    "shared_attribute",
    "pair_features",
    "feature_dim",
    "write_manifest",
]


class Relation(StrEnum):
    SUPERSEDES = "supersedes"
    CORRECTS = "corrects"
    DUPLICATES = "duplicates"
    COMPATIBLE = "compatible"
    FORGET_TARGET = "forget_target"
    UNRELATED = "unrelated"


#: the relations in the order of `PairClassifier.predict`'s columns
RELATIONS: tuple[Relation, ...] = tuple(Relation)

#: the features of a pair's texts alone (`lexical_features`), in order (module docstring)
_TEXT_FEATURES = (
    "cosine", "overlap_new", "overlap_old", "same_speaker", "same_subject", "numbers_differ", "values_shared", "new_value",
    "correction_cue", "change_cue", "addition_cue", "forget_cue", "length_ratio",
)  # fmt: skip
#: the features of a pair's embeddings against the attribute prototypes (`ATTRIBUTES`)
ATTRIBUTE_FEATURES = ("same_attribute", "shared_attribute")
#: every cheap feature after the two embedding blocks, in order; a head uses those its manifest names
LEXICAL = (*_TEXT_FEATURES, *ATTRIBUTE_FEATURES)


def reads_attributes(lexical: Sequence[str]) -> bool:
    """Whether a head over the ``lexical`` features needs attribute prototypes."""
    return not set(ATTRIBUTE_FEATURES).isdisjoint(lexical)

#: attributes of a person that a fact states, each described a few plain ways (no value of
#: any benchmark's): their prototypes are the mean of the descriptions' embeddings
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "work": ("my job", "where I work and what I do for a living", "my occupation, employer and job title"),
    "home": ("the city or town where I live", "where I'm based and have my home", "moving house to another place"),
    "partner": ("my romantic partner", "who I'm dating or in a relationship with", "my boyfriend, girlfriend, husband or wife"),
    "pets": ("my pet", "our dog or cat and its name", "an animal we keep at home"),
    "diet": ("what I eat and my diet", "foods I avoid or don't eat", "my eating habits"),
    "hobbies": ("my hobby", "what I do for fun in my free time", "a pastime I enjoy"),
    "phone": ("my phone number", "the number to call or text me on"),
    "email": ("my email address", "where to email me"),
    "postal address": ("my postal address", "my street and house number", "where to send letters and parcels"),
    "health": ("my health condition", "an illness or medical diagnosis", "what the doctor said I have"),
    "plans": ("the date of an appointment or event", "when something is scheduled", "a plan for a day next week"),
    "family": ("my brother or sister", "my parents and relatives", "a family member's name"),
    "vehicle": ("my car", "the vehicle I drive"),
    "education": ("my school, college or university", "what I study and my degree"),
    "children": ("my children", "my son or daughter"),
    "birthday": ("my age", "my birthday and when I was born"),
    "origin": ("the languages I speak", "where I'm from, my nationality"),
    "media": ("music, films and books I like", "my favourite band, show or author"),
    "sport": ("a sport I play", "the team I support"),
    "travel": ("a trip or holiday", "travel plans and places I'm visiting"),
    "money": ("my salary and income", "money, savings and debts"),
    "beliefs": ("my religion or faith", "my political views"),
    "friends": ("my friends", "a friend's name"),
    "household": ("my house or flat", "living with a roommate or flatmate"),
}
#: the softmax temperature of `same_attribute`: cosines to the prototypes differ by tenths
_ATTRIBUTE_TEMPERATURE = 0.05

HEAD_FORMAT = "memsdk-pair-head/1"
WEIGHTS_FILE = "head.npz"

_KIN = frozenset(
    "brother sister mother mom mum father dad parents son daughter kid kids child children wife husband partner boyfriend girlfriend "
    "fiance fiancee friend cousin aunt uncle grandma grandmother grandpa grandfather niece nephew boss colleague coworker roommate "
    "flatmate housemate neighbor neighbour".split()
)
_SELF = frozenset("i i'm i've i'd i'll me my mine myself we we're we've our us".split())
_CORRECTION = re.compile(r"\b(not|no|never|actually|wrong|mistake|mistaken|meant|correction|correct|corrected|fix|sorry|instead|rather)\b|n't\b", re.I)
_CHANGE = re.compile(
    r"\b(now|nowadays|these days|no longer|any ?more|just|finally|new|newly|moved|switched|changed|quit|left|sold|gave up|"
    r"started|since|became|promoted|pushed|postponed|lately|recently|from now on)\b",
    re.I,
)
_ADDITION = re.compile(r"\b(also|too|as well|another|second|two|both|added|extra|other|more|on top of|in addition|besides)\b", re.I)
_FORGET = re.compile(
    r"\b(forget|forgetting|delete|erase|remove|wipe|purge|unlearn)\b|\b(don't|do not|not|stop|never|rather you didn't)\b[\w\s']{0,20}\b(keep|store|storing|save|remember|record|hold)",
    re.I,
)
_NUMBER = re.compile(r"\d+")
#: a value: an e-mail address, a number, or a capitalised word that does not start a sentence
_VALUE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\d[\d-]*|(?<![.!?:]\s)(?<!^)\b[A-Z][\w'-]*")


def relation_text(text: str) -> str:
    """What is embedded of a memory or a fact: its text without a "Speaker (on date): " header."""
    return HEADER.sub("", text, count=1).strip() or text.strip()


def speaker_of(text: str) -> str | None:
    """The speaker a "Speaker (on date): " header names, lower-cased; None without a header."""
    found = HEADER.match(text)
    if found is None:
        return None
    return found.group(0).split("(", 1)[0].rstrip(": ").strip().casefold() or None


def subject_of(text: str) -> str | None:
    """Who a text is about: its first kinship word ("brother"), else "self" when it speaks in
    the first person, else None (a third person named only by name, or nobody)."""
    words = split_words(relation_text(text))
    bare = [w.removesuffix("'s") for w in words]  # "my sister's dog" is about the sister
    kin = next((w if w in _KIN else word_key(w) for w in bare if w in _KIN or word_key(w) in _KIN), None)
    if kin is not None:
        return kin
    return "self" if any(w in _SELF for w in bare) else None


def values_of(text: str) -> set[str]:
    """The values a text states (`_VALUE`), without its header, lower-cased; "I" is none."""
    return {v.casefold().removesuffix("'s") for v in _VALUE.findall(relation_text(text)) if v not in ("I", "I'm", "I've", "I'd", "I'll")}


def _content(text: str) -> set[str]:
    return {word_key(w) for w in split_words(relation_text(text)) if w not in STOPWORDS}


def lexical_features(new: str, old: str, cosine: float) -> list[float]:
    """The features of one pair's texts, `LEXICAL` but the attribute ones (``cosine``: of its two embeddings)."""
    a, b = _content(new), _content(old)
    shared = len(a & b)
    speakers = speaker_of(new), speaker_of(old)
    subjects = subject_of(new), subject_of(old)
    body = relation_text(new)
    numbers = set(_NUMBER.findall(body)), set(_NUMBER.findall(relation_text(old)))  # a header's date is no number of the fact
    values = values_of(new), values_of(old)
    return [
        cosine,
        shared / len(a) if a else 0.0,
        shared / len(b) if b else 0.0,
        float(speakers[0] is not None and speakers[0] == speakers[1]),
        float(subjects[0] is not None and subjects[0] == subjects[1]),
        float(bool(numbers[0]) and bool(numbers[1]) and numbers[0] != numbers[1]),
        len(values[0] & values[1]) / len(values[0] | values[1]) if values[0] | values[1] else 0.0,
        float(bool(values[0] - values[1])),
        float(_CORRECTION.search(body) is not None),
        float(_CHANGE.search(body) is not None),
        float(_ADDITION.search(body) is not None),
        float(_FORGET.search(body) is not None),
        max(-3.0, min(3.0, math.log((1 + len(a)) / (1 + len(b))))),
    ]


def attribute_prototypes(embed: Callable[[list[str]], np.ndarray], attributes: Mapping[str, Sequence[str]] = ATTRIBUTES) -> np.ndarray:
    """[len(attributes), dim] unit prototypes, one per attribute: the mean of its
    descriptions' embeddings by ``embed`` (an `Embedder.embed`), normalised. A head stores
    the prototypes it was trained with, so a head trained over more attributes serves them."""
    rows = [np.asarray(embed(list(descriptions)), dtype=np.float32).mean(axis=0) for descriptions in attributes.values()]
    p = np.stack(rows)
    out: np.ndarray = p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12)
    return out


def _attribute_weights(x: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    z = (x @ prototypes.T) / _ATTRIBUTE_TEMPERATURE
    e = np.exp(z - z.max(axis=1, keepdims=True))
    out: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return out


def same_attribute(u: np.ndarray, v: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """[n] sum_k a_k(u_i) a_k(v_i), a(x) = softmax(x . P / .05) over the attributes'
    prototypes P: near 1 when both texts are closest to the same attribute, near 0 when
    each is closest to another."""
    out: np.ndarray = np.einsum("ij,ij->i", _attribute_weights(u, prototypes), _attribute_weights(v, prototypes))
    return out


def shared_attribute(u: np.ndarray, v: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """[n] max_k min(u_i . P_k, v_i . P_k): the cosine to the prototype both texts are
    closest to, so a text that states two attributes is near both."""
    out: np.ndarray = np.minimum(u @ prototypes.T, v @ prototypes.T).max(axis=1)
    return out


def feature_dim(embed_dim: int, lexical: Sequence[str] = LEXICAL) -> int:
    return 2 * embed_dim + len(lexical)


def pair_features(
    u: np.ndarray, v: np.ndarray, new: Sequence[str], old: Sequence[str], *, lexical: Sequence[str] = LEXICAL, prototypes: np.ndarray | None = None
) -> np.ndarray:
    """[n, 2 * dim + len(lexical)] float32 features of n pairs: row i is (``new[i]``, ``old[i]``)
    with embeddings ``u[i]`` and ``v[i]`` (unit vectors, as every `Embedder` returns them),
    then the ``lexical`` features in that order; the attribute ones need the ``prototypes``."""
    u, v = np.asarray(u, dtype=np.float32), np.asarray(v, dtype=np.float32)
    if u.ndim != 2 or u.shape != v.shape or len(new) != len(u) or len(old) != len(u):
        raise ValueError(f"pair_features needs [n, dim] vectors and n texts each side, got {u.shape}, {v.shape}, {len(new)}, {len(old)}")
    unknown = [name for name in lexical if name not in LEXICAL]
    if unknown:
        raise ValueError(f"unknown pair features {unknown}: the known ones are {list(LEXICAL)}")
    cosine = np.einsum("ij,ij->i", u, v)
    columns: dict[str, np.ndarray] = dict(
        zip(_TEXT_FEATURES, np.array([lexical_features(n, o, float(c)) for n, o, c in zip(new, old, cosine)], dtype=np.float32).reshape(len(u), len(_TEXT_FEATURES)).T)
    )
    if reads_attributes(lexical):
        if prototypes is None or prototypes.ndim != 2 or prototypes.shape[1] != u.shape[1]:
            raise ValueError(f"the attribute features need [k, {u.shape[1]}] attribute prototypes, got {None if prototypes is None else prototypes.shape}")
        columns["same_attribute"] = same_attribute(u, v, prototypes).astype(np.float32)
        columns["shared_attribute"] = shared_attribute(u, v, prototypes).astype(np.float32)
    chosen = np.stack([columns[name] for name in lexical], axis=1) if lexical else np.zeros((len(u), 0), dtype=np.float32)
    return np.concatenate([u * v, np.abs(u - v), chosen], axis=1)


class RelationModel(Protocol):
    """What `PairManager` needs of a classifier: the embedder it was trained with (by
    `Embedder.name`), its version, and relation probabilities of pairs."""

    @property
    def embedder(self) -> str: ...

    @property
    def version(self) -> str: ...

    def predict_pairs(self, new: Sequence[str], old: Sequence[str], u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """[n, len(RELATIONS)] probabilities, columns in `RELATIONS` order."""
        ...


def write_manifest(folder: Path, *, version: str, embedder: str, metrics: Mapping[str, float], spec: Mapping[str, Any], training_data_hash: str | None) -> Path:
    """``folder/manifest.json`` of a manager model without an LLM: the registry's fields (role
    manager, ``version``, the embedder as ``base_model``, ``metrics`` as ``eval_metrics``)
    and the model's own description, ``spec``, under ``config``. Returns ``folder``."""
    manifest = {
        "role": "manager",
        "version": version,
        "base_model": embedder,
        "adapter_path": ".",
        "created_at": datetime.now(UTC).isoformat(),
        "training_data_hash": training_data_hash,
        "eval_metrics": {k: float(v) for k, v in metrics.items()},
        "config": dict(spec),
        "promote": False,
        "prompt": None,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    out: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return out


@dataclass(frozen=True, eq=False)
class PairClassifier:
    """An MLP head over `pair_features`: ``layers`` are (weight [in, out], bias [out]) pairs,
    ReLU between them; ``labels`` name the last layer's outputs (any order; `predict` returns
    `RELATIONS` order). ``mean`` and ``scale`` standardise the features first. ``lexical``
    names the features after the embedding blocks (a head trained before one was added names
    fewer); ``prototypes`` are the attribute prototypes the attribute features were trained
    with."""

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    mean: np.ndarray
    scale: np.ndarray
    labels: tuple[Relation, ...]
    embedder: str
    version: str = "pairs-v1"
    metrics: Mapping[str, float] = field(default_factory=dict)
    lexical: tuple[str, ...] = LEXICAL
    prototypes: np.ndarray | None = None
    #: the P(supersedes) + P(corrects) it was measured to retire at (`PairManager` serves it
    #: there); None: the manager's default
    supersede_at: float | None = None

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a pair head needs at least one layer")
        unknown = [name for name in self.lexical if name not in LEXICAL]
        if unknown:
            raise ValueError(f"a pair head over unknown features {unknown}: this module computes {list(LEXICAL)}")
        if reads_attributes(self.lexical) and (self.prototypes is None or self.prototypes.ndim != 2):
            raise ValueError(f"a pair head over {list(ATTRIBUTE_FEATURES)} needs its [k, dim] attribute prototypes")
        if sorted(self.labels) != sorted(RELATIONS):
            raise ValueError(f"a pair head's labels must be the relations {[str(r) for r in RELATIONS]}, got {[str(r) for r in self.labels]}")
        width = self.mean.shape[0]
        for i, (w, b) in enumerate(self.layers):
            if w.ndim != 2 or w.shape[0] != width or b.shape != (w.shape[1],):
                raise ValueError(f"layer {i} has shapes {w.shape}, {b.shape} after a width of {width}")
            width = w.shape[1]
        if width != len(self.labels) or self.scale.shape != self.mean.shape:
            raise ValueError(f"the head ends at width {width} for {len(self.labels)} labels, or its scale does not match its mean")

    @property
    def input_dim(self) -> int:
        return int(self.mean.shape[0])

    def predict(self, features: np.ndarray) -> np.ndarray:
        """[n, len(RELATIONS)] probabilities (float64, rows sum to 1) of n feature rows."""
        features = np.asarray(features, dtype=np.float32)
        if features.ndim != 2 or features.shape[1] != self.input_dim:
            raise ValueError(f"the pair head {self.version} reads [n, {self.input_dim}] features, got {features.shape}")
        x = (features - self.mean) / self.scale
        for i, (w, b) in enumerate(self.layers):
            x = x @ w + b
            if i < len(self.layers) - 1:
                x = np.maximum(x, 0.0)
        probs = _softmax(x)
        return probs[:, [self.labels.index(r) for r in RELATIONS]]

    def predict_pairs(self, new: Sequence[str], old: Sequence[str], u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.predict(pair_features(u, v, new, old, lexical=self.lexical, prototypes=self.prototypes))

    # -- the folder: weights + manifest ------------------------------------------------------------

    def save(self, folder: str | os.PathLike[str], *, config: Mapping[str, Any] | None = None, training_data_hash: str | None = None) -> Path:
        """Write ``head.npz`` and ``manifest.json`` into ``folder``. The manifest has the
        registry's fields (role manager, ``version``, the embedder as ``base_model``, the
        metrics as ``eval_metrics``) and the head's description under ``config``: format,
        weights file, label order, feature spec, layer sizes, and ``config["training"]``."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, Any] = {"mean": self.mean, "scale": self.scale}  # Any: the stubs type savez's keywords as its own options
        for i, (w, b) in enumerate(self.layers):
            arrays[f"w{i}"], arrays[f"b{i}"] = w.astype(np.float32), b.astype(np.float32)
        if self.prototypes is not None:
            arrays["prototypes"] = self.prototypes.astype(np.float32)
        np.savez_compressed(out / WEIGHTS_FILE, **arrays)
        embed_dim = (self.input_dim - len(self.lexical)) // 2
        features: dict[str, Any] = {"embedding": ["u*v", "|u-v|"], "embed_dim": embed_dim, "lexical": list(self.lexical), "dim": self.input_dim}
        if self.prototypes is not None:
            features["attributes"] = list(ATTRIBUTES)
        spec = {
            "format": HEAD_FORMAT,
            "weights": WEIGHTS_FILE,
            "labels": [str(r) for r in self.labels],
            "features": features,
            "embedder": self.embedder,
            "layers": [int(w.shape[1]) for w, _ in self.layers],
            "supersede_at": self.supersede_at,
            "training": dict(config or {}),
        }
        return write_manifest(out, version=self.version, embedder=self.embedder, metrics=self.metrics, spec=spec, training_data_hash=training_data_hash)

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> PairClassifier:
        """A head saved by `save`. ValueError when the folder holds another format, or a head
        over a feature this module does not compute (`LEXICAL`)."""
        root = Path(folder)
        try:
            manifest = json.loads((root / "manifest.json").read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{root} has no readable manifest.json: {exc}") from None
        spec = manifest.get("config", {})
        if spec.get("format") != HEAD_FORMAT:
            raise ValueError(f"{root} is not a pair head ({HEAD_FORMAT}): its manifest says format {spec.get('format')!r}")
        features = spec["features"]
        lexical = tuple(features["lexical"])  # a name this module does not compute: __post_init__ refuses it
        if features["dim"] != 2 * features["embed_dim"] + len(lexical):
            raise ValueError(f"{root} names {len(lexical)} features after 2 x {features['embed_dim']} embedding dims, not its width {features['dim']}")
        with np.load(root / spec["weights"], allow_pickle=False) as arrays:
            layers = tuple((arrays[f"w{i}"], arrays[f"b{i}"]) for i in range(len(spec["layers"])))
            mean, scale = arrays["mean"], arrays["scale"]
            prototypes = arrays["prototypes"] if "prototypes" in arrays.files else None
        return cls(
            layers=layers, mean=mean, scale=scale, labels=tuple(Relation(x) for x in spec["labels"]), embedder=spec["embedder"],
            version=manifest["version"], metrics=dict(manifest.get("eval_metrics", {})), lexical=lexical, prototypes=prototypes,
            supersede_at=spec.get("supersede_at"),
        )
