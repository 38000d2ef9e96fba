"""Shared text-making helpers for the synthetic text replicas: neutral filler, cue words mixed in, unique rows;
one text at a time, or (`paragraphs`) many at once with numpy, for the replicas that run to hundreds of thousands."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

FILLER = tuple("""
the a an and or but so of to in on at for with from by about as into over after before than then this that
these those it its is was are were be been being have has had do does did not no yes just also very really
quite still even only more most some any many much few all each every other another same such own here there
when where why how what which who whom while because though although if unless until since again once always
never often sometimes maybe perhaps well now today yesterday tomorrow time day week year people person thing
things way place world part point case fact idea reason question answer problem story news post thread page
comment reply article topic view side number group home work school city town street road car house room
night morning evening friend family kid man woman guy someone anyone everyone nobody something anything
nothing think know see look make take give get go come say tell ask want need use find feel seem keep let
put try call leave read write talk start stop help show hear play run move live believe hold bring happen
good new first last long great little right old big high small large next early young important few public
bad same able sure clear true whole free real full late hard easy open simple
""".split())
FIRST = ("alex", "sam", "jo", "max", "kim", "lee", "pat", "ray", "ash", "dee", "finn", "gus", "ivy", "kai", "lou",
         "mo", "ned", "ola", "quin", "rio", "sky", "tess", "val", "wes", "zoe")
LAST = ("rider", "fox", "stone", "wood", "hill", "brook", "frost", "lake", "moss", "vale", "reed", "cole", "dale",
        "marsh", "wren")
TEXT_BREAK = "\x00"  # between texts while `paragraphs` holds them as one string; no word contains it


def pick(rng: np.random.Generator, pool: Sequence[str], count: int) -> list[str]:
    return [pool[i] for i in rng.integers(0, len(pool), size=count)]


def sentence(rng: np.random.Generator, cues: Sequence[str], length: tuple[int, int] = (6, 14),
             filler: Sequence[str] = FILLER, end: str = ".") -> str:
    """Filler words with the cue words dropped in at random places, capitalised and ended."""
    words = pick(rng, filler, int(rng.integers(*length)))
    for cue in cues:
        words.insert(int(rng.integers(0, len(words) + 1)), cue)
    text = " ".join(words)
    return text[:1].upper() + text[1:] + end


def paragraph(rng: np.random.Generator, cues: Sequence[str], sentences: tuple[int, int] = (1, 4), **kw) -> str:
    """Several sentences, the cue words spread among them."""
    count = int(rng.integers(*sentences))
    parts: list[list[str]] = [[] for _ in range(count)]
    for cue in cues:
        parts[int(rng.integers(0, count))].append(cue)
    return " ".join(sentence(rng, part, **kw) for part in parts)


def username(rng: np.random.Generator) -> str:
    first, last = FIRST[int(rng.integers(len(FIRST)))], LAST[int(rng.integers(len(LAST)))]
    style = int(rng.integers(3))
    if style == 0:
        return f"{first}_{last}{int(rng.integers(1, 999))}"
    return f"{first.title()}{last.title()}" if style == 1 else f"{last}{first}{int(rng.integers(10, 99))}"


def unique(make: Callable[[], str], count: int, taken: set[str] | None = None) -> list[str]:
    """`count` distinct strings from `make`, none of them in `taken` (which is updated)."""
    taken = set() if taken is None else taken
    out = []
    while len(out) < count:
        text = make()
        if text not in taken:
            taken.add(text)
            out.append(text)
    return out


def capitalised(words: np.ndarray) -> np.ndarray:
    """Each word with its first letter upper-cased and the rest as it was ('talk page' -> 'Talk page')."""
    text = np.asarray(words).astype(np.dtypes.StringDType())
    head, rest = np.strings.slice(text, 0, 1), np.strings.slice(text, 1, None)
    return np.strings.add(np.strings.upper(head), rest).astype(object)


def paragraphs(rng: np.random.Generator, count: int, cue_rows: np.ndarray, cues: np.ndarray,
               sentences: tuple[int, int] = (1, 4), length: tuple[int, int] = (6, 14),
               filler: Sequence[str] = FILLER, end: str = ".") -> list[str]:
    """`count` texts as `paragraph` writes each, made at once: cues[i] goes to text cue_rows[i], into one of its
    sentences at random; each sentence is its filler words and cues in random order, capitalised and ended."""
    per_text = rng.integers(*sentences, size=count)
    first = np.cumsum(per_text) - per_text  # each text's first sentence
    text_of = np.repeat(np.arange(count), per_text)  # each sentence's text
    fill = rng.integers(*length, size=len(text_of))
    cue_sentence = first[cue_rows] + (rng.random(len(cue_rows)) * per_text[cue_rows]).astype(int)
    sentence_of = np.concatenate([np.repeat(np.arange(len(text_of)), fill), cue_sentence])
    words = np.concatenate([np.asarray(filler, dtype=object)[rng.integers(len(filler), size=fill.sum())],
                            np.asarray(cues, dtype=object)])
    order = np.lexsort((rng.random(len(words)), sentence_of))  # by sentence, in random order within one
    sentence_of, words = sentence_of[order], words[order]
    opens = np.flatnonzero(np.r_[True, sentence_of[1:] != sentence_of[:-1]])
    words[opens] = capitalised(words[opens])
    closes = np.r_[opens[1:] - 1, len(words) - 1]
    last_of_text = np.r_[text_of[1:] != text_of[:-1], True]
    gaps = np.full(len(words), " ", dtype=object)
    gaps[closes] = np.array([end + " ", end + TEXT_BREAK], dtype=object)[last_of_text.astype(int)]
    joined = np.empty(2 * len(words), dtype=object)
    joined[0::2], joined[1::2] = words, gaps
    return "".join(joined.tolist()).split(TEXT_BREAK)[:-1]
