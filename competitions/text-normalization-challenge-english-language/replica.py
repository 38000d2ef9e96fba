"""A synthetic text-normalization-challenge-english-language: classed English tokens and their spoken forms.

Public holds only en_train.csv.zip, en_test_2.csv.zip and en_sample_submission_2.csv.zip (quoted CSVs).
About 80% of the tokens are PLAIN words or PUNCT marks spoken as written; the rest are CARDINAL ("145" ->
"one hundred forty five"), ORDINAL, DATE, LETTERS ("BBC" -> "b b c") and MONEY tokens with one spoken form each,
and ranges ("12 - 15"), whose dash is spoken "to" where a dash elsewhere is written as it is.
Copying `before` (the sample submission) scores about 0.81-0.86; a before -> after lookup from train with copy as the
fallback about 0.91-0.93, and rules for numbers and letters close most of the rest.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.demo import text_norm
from runner.demo.text_norm import Language, choose, concat, generate_replica, numbers, one

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
IRREGULAR_ORDINALS = {"one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
                      "nine": "ninth", "twelve": "twelfth"}
MONTHS = ("January February March April May June July August September October November December").split()
ACRONYMS = ("BBC", "USA", "UK", "FBI", "CIA", "EU", "UN", "NBA", "NFL", "CEO", "DVD", "TV", "PC", "DNA", "IBM",
            "HIV", "MIT", "BMW", "CNN", "USB")
WORDS = tuple(
    "the of and to in a is was for on as with by he it at from his an were are which this also be has or had its "
    "after their her but been other they new who she all when there more into time only most years city some "
    "school would over many team later during season then these such them where between about state world under "
    "part known both war early called since film music album county game family best used north south east west "
    "river house church station village town government party national public group league released became made "
    "played born won took began built named worked record history series university college club player book "
    "children life people district line road area center".split())
NA_STRINGS = ("NA", "NULL")  # read back as missing by pandas, so never drawn as an acronym
PUNCT = (",", ",", ",", "-", ":", ";", "(", ")", '"')
MIX = {"PLAIN": 0.70, "PUNCT": 0.12, "CARDINAL": 0.06, "DATE": 0.04, "LETTERS": 0.04, "ORDINAL": 0.02,
       "MONEY": 0.02, "RANGE": 0.01}
COMMON_SHARE = 0.6  # share of numbers drawn from a small, often repeated range
NUMBER_TABLE = 10_000  # every count and sum of money drawn is below this
ORDINALS = (1, 40)  # ORDINAL tokens' values (a half-open range)
DAYS, YEARS = (1, 29), (1950, 2021)  # a date's days and years (half-open ranges)
ACRONYM_SHARE = 0.8  # LETTERS tokens from ACRONYMS; the rest are random 2-4 capitals
SPELT = (2, 5)  # letters of a random LETTERS token (a half-open range)
REAL_TOKENS = (8_924_976, 993_465)  # the real en_train and en_test_2 tokens


def number(n: int) -> str:
    """English cardinal words, as the data writes them (no 'and', no hyphens)."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + (f" {ONES[n % 10]}" if n % 10 else "")
    if n < 1000:
        return f"{ONES[n // 100]} hundred" + (f" {number(n % 100)}" if n % 100 else "")
    return f"{number(n // 1000)} thousand" + (f" {number(n % 1000)}" if n % 1000 else "")


def ordinal(n: int) -> str:
    words = number(n).split()
    last = words[-1]
    if last in IRREGULAR_ORDINALS:
        words[-1] = IRREGULAR_ORDINALS[last]
    else:
        words[-1] = last[:-1] + "ieth" if last.endswith("y") else last + "th"
    return " ".join(words)


def suffix(n: int) -> str:
    return "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def year(y: int) -> str:
    if 2000 <= y < 2010:
        return "two thousand" + (f" {ONES[y % 10]}" if y % 10 else "")
    high, low = divmod(y, 100)
    if low == 0:
        return f"{number(high)} hundred"
    return f"{number(high)} o {ONES[low]}" if low < 10 else f"{number(high)} {number(low)}"


def _counts(rng: np.random.Generator, n: int) -> np.ndarray:
    """Mostly small repeated numbers, otherwise a large one (never a 1950-2020 year, which dates own)."""
    common, low = rng.random(n) < COMMON_SHARE, rng.random(n) < 0.5
    large = rng.integers(np.where(low, 100, 2100), np.where(low, 1000, 10000))
    return np.where(common, rng.integers(0, 100, n), large)


def written_ordinal(n: int) -> str:
    return f"{n}{suffix(n)}"


def written_dollars(n: int) -> str:
    return f"${n}"


def dollars(n: int) -> str:
    return f"{number(n)} dollar" + ("" if n == 1 else "s")


def _cardinals(rng, n):
    return numbers(_counts(rng, n), str, number, NUMBER_TABLE)


def _ordinals(rng, n):
    return numbers(rng.integers(*ORDINALS, n), written_ordinal, ordinal, ORDINALS[1])


def _dates(rng, n):
    """Half a bare year, half a full date ('5 March 1984' -> 'the fifth of march nineteen eighty four')."""
    written, said = numbers(rng.integers(*YEARS, n), str, year, YEARS[1])
    full = np.flatnonzero(rng.random(n) >= 0.5)
    day_written, day_said = numbers(rng.integers(*DAYS, len(full)), str, ordinal, DAYS[1])
    month = np.asarray(MONTHS, dtype=object)[rng.integers(0, len(MONTHS), len(full))]
    written[full] = concat(day_written, " ", month, " ", written[full])
    said[full] = concat("the ", day_said, " of ", np.strings.lower(month.astype(str)), " ", said[full])
    return written, said


def _spelt(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n random capitals words ('QXV') and their letters spoken ('q x v'); none that pandas reads as missing."""
    codes, length = rng.integers(0, 26, (n, SPELT[1] - 1)).astype(np.uint8), rng.integers(*SPELT, n)
    spaced = np.full((n, 2 * SPELT[1] - 3), ord(" "), dtype=np.uint8)
    spaced[:, ::2] = codes + ord("a")
    word = np.strings.slice((codes + ord("A")).view(f"S{codes.shape[1]}").ravel().astype(str), 0, length)
    said = np.strings.slice(spaced.view(f"S{spaced.shape[1]}").ravel().astype(str), 0, 2 * length - 1)
    word, said = word.astype(object), said.astype(object)
    missing = np.flatnonzero(np.isin(word, NA_STRINGS))
    if len(missing):
        word[missing], said[missing] = _spelt(rng, len(missing))
    return word, said


def _letters(rng, n):
    known = rng.random(n) < ACRONYM_SHARE
    word, said = choose(rng, n, ACRONYMS, lambda w: " ".join(w.lower()))
    spelt = np.flatnonzero(~known)
    word[spelt], said[spelt] = _spelt(rng, len(spelt))
    return word, said


def _money(rng, n):
    amount = np.where(rng.random(n) < 0.7, rng.integers(1, 30, n), rng.integers(30, 5000, n))
    return numbers(amount, written_dollars, dollars, NUMBER_TABLE)


_date = one(_dates)  # a single date, as the replica draws them
ENGLISH = Language(prefix="en", title="Text Normalization Challenge - English Language", words=WORDS, punct=PUNCT,
                   makers={"CARDINAL": _cardinals, "ORDINAL": _ordinals, "DATE": _dates, "LETTERS": _letters,
                           "MONEY": _money}, mix=MIX, range_word="to", real_tokens=REAL_TOKENS)


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test tokens at `scale`: a factor of the replica's own, or 'real'."""
    return text_norm.counts(ENGLISH, scale)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (en_*.csv.zip, description.md) and prepared/private (answers.csv, sample)."""
    generate_replica(root, rng, ENGLISH, scale)
