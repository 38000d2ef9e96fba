"""The shared generator of the text-normalization replicas: sentences of classed tokens, zipped quoted CSVs.

A language supplies a PLAIN vocabulary, punctuation and one drawer per semiotic class returning many (before,
after) pairs at once. PLAIN and PUNCT tokens are copied (after == before), as in the Kaggle CSVs; the other classes
have one deterministic spoken form, so a before -> after lookup learned from train gets most test tokens right and
misses only the values (large numbers, full dates, rare acronyms) that train never showed. One kind of token is
spoken by its context, as many are in the real data: a dash between two numbers ("12 - 15") is the language's word
for a range ("to"), elsewhere a dash as written; the numbers around it seldom repeat, so no lookup, even with the
exact neighbours, gets it right, while a model that sees its neighbours' shapes can.

Sizes are counted in tokens, as the real competitions' are; whole sentences are written, the last one cut to fit.
Every token is drawn by numpy for its whole class at once, and spoken forms come from tables made once per value,
so the real 9-10 million tokens take about half a minute, most of it writing the CSVs.
"""
from __future__ import annotations

import csv
import functools
import io
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._words import capitalised

Drawer = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]  # n (before, after) pairs of a class

ZIP_TIME = (2017, 11, 14, 0, 0, 0)  # a fixed member time keeps the zips byte-identical for a seed
ZIP64_ROWS = 10_000_000  # past this many rows a member might pass 2 GiB, which needs zip64 sizes
TOKENS = (5, 15)  # tokens per sentence before the closing punctuation
ENDINGS, ENDING_P = (".", "?", "!"), (0.85, 0.1, 0.05)  # how sentences close, and how often
RANGE_DASH = "-"  # also among each language's punctuation, where it is spoken as written
RANGE, DASH, END = "RANGE", "DASH", "END"  # a range's slot, its dash and a sentence's closing mark, while drawn
TRAIN_TOKENS, TEST_TOKENS = 3200, 640  # about 300 and 60 sentences
MIN_TOKENS = 50  # at the smallest factors, still a few sentences in each split
COLUMNS = ("sentence_id", "token_id", "class", "before", "after")


@dataclass(frozen=True)
class Language:
    prefix: str  # file prefix, "en" or "ru"
    title: str  # the competition's title
    words: tuple[str, ...]  # PLAIN vocabulary
    punct: tuple[str, ...]  # mid-sentence punctuation
    makers: dict[str, Drawer]  # class -> (before, after) drawer; PLAIN and PUNCT default to copied tokens
    mix: dict[str, float]  # class weights, PLAIN and PUNCT included; RANGE: three tokens, number dash number
    range_word: str  # how a dash between two numbers is spoken
    real_tokens: tuple[int, int]  # the real competition's train and test tokens


@functools.cache
def table(say: Callable[[int], str], size: int) -> np.ndarray:
    """say(n) for every n below `size`, to index by value: the per-token work done once per value."""
    return np.array([say(n) for n in range(size)], dtype=object)


def numbers(values: np.ndarray, write: Callable[[int], str], say: Callable[[int], str],
            size: int) -> tuple[np.ndarray, np.ndarray]:
    """Each value written and spoken, through the tables of both."""
    return table(write, size)[values], table(say, size)[values]


def choose(rng: np.random.Generator, n: int, options: tuple[str, ...],
           say: Callable[[str], str]) -> tuple[np.ndarray, np.ndarray]:
    """n of `options` at random, with their spoken forms."""
    index = rng.integers(len(options), size=n)
    return np.asarray(options, dtype=object)[index], np.array([say(o) for o in options], dtype=object)[index]


def concat(*parts) -> np.ndarray:
    """Strings joined element by element (arrays, or one string for all), for whole columns at once."""
    joined = functools.reduce(np.strings.add, [np.asarray(p).astype(np.dtypes.StringDType()) for p in parts])
    return joined.astype(object)


def one(draw: Drawer) -> Callable[[np.random.Generator], tuple[str, str]]:
    """A drawer of a single (before, after) pair, as one example of a class is drawn elsewhere."""
    def single(rng: np.random.Generator) -> tuple[str, str]:
        before, after = draw(rng, 1)
        return before[0], after[0]
    return single


def counts(language: Language, scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test tokens at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    real_train, real_test = language.real_tokens
    return scaled(TRAIN_TOKENS, real_train, scale, MIN_TOKENS), scaled(TEST_TOKENS, real_test, scale, MIN_TOKENS)


def _kinds(language: Language, n: int, rng: np.random.Generator, ranges: bool = True) -> np.ndarray:
    """n slots' classes by the language's mix (a range is one slot), without ranges if not `ranges`."""
    mix = {k: w for k, w in language.mix.items() if ranges or k != RANGE}
    weights = np.array(list(mix.values()))
    return np.array(list(mix), dtype=object)[rng.choice(len(mix), size=n, p=weights / weights.sum())]


def _slots(language: Language, tokens: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each sentence's slot count and every slot's class, for exactly `tokens` tokens with the closing marks:
    whole sentences while they fit, then one of the tokens left, drawn without ranges (three tokens a slot) so
    that it holds just as many."""
    least = TOKENS[0] + 1  # a sentence's fewest tokens: so many sentences always suffice
    slots = rng.integers(*TOKENS, size=tokens // least + 1)
    enough = int(np.searchsorted(np.cumsum(slots + 1), tokens)) + 1  # the most that could be needed
    slots = slots[:enough]
    kinds = _kinds(language, int(slots.sum()), rng)
    sentence = np.repeat(np.arange(len(slots)), slots)
    sizes = slots + 1 + 2 * np.bincount(sentence, weights=kinds == RANGE, minlength=len(slots)).astype(int)
    whole = int(np.searchsorted(np.cumsum(sizes), tokens, side="right"))
    rest = tokens - int(sizes[:whole].sum())
    slots, kinds = slots[:whole], kinds[:int(slots[:whole].sum())]
    if rest:
        slots, kinds = np.r_[slots, rest - 1], np.r_[kinds, _kinds(language, rest - 1, rng, ranges=False)]
    return slots, kinds


def _layout(slots: np.ndarray, kinds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every token's sentence and kind: a range's slot becomes CARDINAL, DASH, CARDINAL, and each sentence ends
    with an END token."""
    width = np.where(kinds == RANGE, 3, 1)
    expanded = np.repeat(kinds, width)
    within = np.arange(len(expanded)) - np.repeat(np.cumsum(width) - width, width)  # place inside its slot
    expanded[(expanded == RANGE) & (within == 1)] = DASH
    expanded[expanded == RANGE] = "CARDINAL"
    owner = np.repeat(np.repeat(np.arange(len(slots)), slots), width)  # each expanded token's sentence
    sentence = np.repeat(np.arange(len(slots)), np.bincount(owner, minlength=len(slots)) + 1)
    kind = np.full(len(sentence), END, dtype=object)
    kind[np.arange(len(expanded)) + owner] = expanded  # each earlier sentence's END comes before it
    return sentence, kind


def _opens(sentence: np.ndarray) -> np.ndarray:
    """Whether each token opens its sentence."""
    return np.r_[True, sentence[1:] != sentence[:-1]]


def _fill(language: Language, sentence: np.ndarray, kind: np.ndarray,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every token's class, before and after, drawn class by class."""
    before, after = np.empty(len(kind), dtype=object), np.empty(len(kind), dtype=object)
    copied = {"PLAIN": language.words, "PUNCT": language.punct}
    for name in dict.fromkeys([*language.mix, "CARDINAL", DASH, END]):  # a fixed order keeps a seed's draws
        where = np.flatnonzero(kind == name)
        if not len(where):
            continue
        if name in language.makers:
            before[where], after[where] = language.makers[name](rng, len(where))
        elif name in copied:
            before[where] = after[where] = np.asarray(copied[name], dtype=object)[rng.integers(len(copied[name]),
                                                                                          size=len(where))]
        elif name == DASH:
            before[where], after[where] = RANGE_DASH, language.range_word
        else:  # END
            before[where] = after[where] = np.asarray(ENDINGS, dtype=object)[
                rng.choice(len(ENDINGS), size=len(where), p=ENDING_P)]
    if "PLAIN" not in language.makers:  # a copied word opening its sentence is capitalised
        first = np.flatnonzero(_opens(sentence) & (kind == "PLAIN"))
        before[first] = after[first] = capitalised(before[first])
    named = kind.copy()
    named[kind == DASH], named[kind == END] = "VERBATIM", "PUNCT"
    return named, before, after


def _sentences(language: Language, tokens: int, rng: np.random.Generator) -> pd.DataFrame:
    """Exactly `tokens` tokens in sentences: sentence_id, token_id, class, before, after."""
    sentence, kind = _layout(*_slots(language, tokens, rng))
    named, before, after = _fill(language, sentence, kind, rng)
    opens = np.flatnonzero(_opens(sentence))
    token = np.arange(len(sentence)) - opens[sentence]
    return pd.DataFrame(dict(zip(COLUMNS, (sentence, token, named, before, after))))


def _write_quoted(frame: pd.DataFrame, handle) -> None:
    """The Kaggle CSVs' quoting: every non-numeric field in double quotes."""
    frame.to_csv(handle, index=False, quotechar='"', quoting=csv.QUOTE_NONNUMERIC)


def _zip_csv(path: Path, frame: pd.DataFrame) -> None:
    """A zip holding one quoted csv named like the zip without '.zip', at the zip root and deflated as the
    competition's are, written into the zip as it is made (the whole text of the real size's train is about half a
    gigabyte)."""
    member = zipfile.ZipInfo(path.name.removesuffix(".zip"), date_time=ZIP_TIME)
    member.external_attr, member.compress_type = 0o644 << 16, zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w") as archive, archive.open(member, "w", force_zip64=len(frame) > ZIP64_ROWS) as raw:
        with io.TextIOWrapper(raw, encoding="utf-8", newline="") as text:
            _write_quoted(frame, text)


def generate_replica(root: Path, rng: np.random.Generator, language: Language, scale: float | str = 1.0) -> None:
    """Write prepared/public (three zipped CSVs, description.md) and prepared/private (answers, sample)."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train_tokens, test_tokens = counts(language, scale)
    train, test = _sentences(language, train_tokens, rng), _sentences(language, test_tokens, rng)
    ids = test["sentence_id"].astype(str) + "_" + test["token_id"].astype(str)
    sample = pd.DataFrame({"id": ids, "after": test["before"]})
    answers = pd.DataFrame({"id": ids, "after": test["after"]})
    prefix = language.prefix
    _zip_csv(public / f"{prefix}_train.csv.zip", train)
    _zip_csv(public / f"{prefix}_test_2.csv.zip", test[["sentence_id", "token_id", "before"]])
    _zip_csv(public / f"{prefix}_sample_submission_2.csv.zip", sample)
    with open(private / "answers.csv", "w", encoding="utf-8", newline="") as handle:
        _write_quoted(answers, handle)
    with open(private / "sample_submission.csv", "w", encoding="utf-8", newline="") as handle:
        _write_quoted(sample, handle)
    describe(public, language.title,
             "Rewrite each written token (`before`) into its spoken form (`after`); `class` is given for train only.",
             "Submissions are evaluated on prediction accuracy (the total percent of correct tokens); the strings "
             "must match exactly.",
             'Submit `id,after` with id = "<sentence_id>_<token_id>".')
