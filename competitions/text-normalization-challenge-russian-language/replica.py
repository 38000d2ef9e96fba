"""A synthetic text-normalization-challenge-russian-language: classed Russian tokens and their spoken forms.

Public holds only ru_train.csv.zip, ru_test_2.csv.zip and ru_sample_submission_2.csv.zip (quoted CSVs).
Most tokens are Cyrillic PLAIN words or PUNCT marks spoken as written. Latin words are transliterated letter by
letter with the '_trans' suffix ("Julius" -> "д_trans ж_trans у_trans л_trans и_trans у_trans с_trans"), numbers
are spoken in Russian ("145" -> "сто сорок пять"), dates in the genitive ("12 февраля 2013" -> "двенадцатого
февраля две тысячи тринадцатого года"), acronyms letter by letter, "5 руб." with the right plural, and ranges
("12 - 15"), whose dash is spoken "до" where a dash elsewhere is written as it is.
Copying `before` (the sample submission) scores about 0.8-0.83; a before -> after lookup from train about 0.91-0.94.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.demo import text_norm
from runner.demo.text_norm import Language, choose, concat, generate_replica, numbers, one

UNITS = "ноль один два три четыре пять шесть семь восемь девять".split()
TEENS = ("десять одиннадцать двенадцать тринадцать четырнадцать пятнадцать шестнадцать семнадцать восемнадцать "
         "девятнадцать").split()
TENS = "_ _ двадцать тридцать сорок пятьдесят шестьдесят семьдесят восемьдесят девяносто".split()
HUNDREDS = "_ сто двести триста четыреста пятьсот шестьсот семьсот восемьсот девятьсот".split()
GENITIVE_ORDINALS = dict(enumerate(
    ("_ первого второго третьего четвёртого пятого шестого седьмого восьмого девятого десятого одиннадцатого "
     "двенадцатого тринадцатого четырнадцатого пятнадцатого шестнадцатого семнадцатого восемнадцатого "
     "девятнадцатого").split())) | {20: "двадцатого", 30: "тридцатого", 40: "сорокового", 50: "пятидесятого",
                                    60: "шестидесятого", 70: "семидесятого", 80: "восьмидесятого",
                                    90: "девяностого"}
MONTHS = "января февраля марта апреля мая июня июля августа сентября октября ноября декабря".split()
LATIN = dict(zip("abcdefghijklmnopqrstuvwxyz", "а б к д е ф г х и дж к л м н о п к р с т у в у кс и з".split()))
ACRONYMS = ("СССР", "США", "РФ", "МВД", "ФСБ", "ВВП", "ООН", "ЦРУ", "ЕС", "МГУ", "РЖД", "СНГ")
LATIN_ACRONYMS = ("BBC", "CNN", "USB", "DVD", "IBM", "HP", "BMW", "NBA", "MTV", "PC")
LATIN_WORDS = ("Julius", "Google", "London", "Paris", "Windows", "Linux", "Facebook", "Twitter", "Amazon", "Intel",
               "Nokia", "Sony", "Yahoo", "Oracle", "Python", "Berlin", "Johnson", "Smith", "Wikipedia", "Boston")
WORDS = tuple(
    "в и не на что он с по это как а к из у же за бы от о так для она но все его был мы только или ещё они год "
    "было время когда даже уже если при после где там между города году была были также является один этого "
    "который которые которая более реки область района во до под над через против около первый второй новый "
    "большой российский советский русский государственный национальный народный главный известный родился "
    "умер стал получил окончил работал вошёл основан находится входит является жил служил писатель художник "
    "учёный композитор футболист команда клуб город село деревня река улица школа университет институт "
    "война армия фильм книга журнал газета театр музей церковь храм премия награда орден".split())
PUNCT = (",", ",", ",", "-", ":", ";", "(", ")", "«", "»")
MIX = {"PLAIN": 0.70, "PUNCT": 0.12, "CARDINAL": 0.06, "DATE": 0.05, "LETTERS": 0.05, "MONEY": 0.02, "RANGE": 0.01}
LATIN_SHARE = 0.06  # share of PLAIN tokens that are Latin words, transliterated
COMMON_SHARE = 0.6  # share of numbers drawn from a small, often repeated range
NUMBER_TABLE = 10_000  # every count and sum of money drawn is below this
DAYS, YEARS = (1, 29), (1950, 2020)  # a date's days and years (half-open ranges)
LATIN_ACRONYM_SHARE = 0.35  # LETTERS tokens that are Latin acronyms, transliterated
REAL_TOKENS = (9_515_325, 1_059_191)  # the real ru_train and ru_test_2 tokens


def plural(n: int, one: str, few: str, many: str) -> str:
    if n % 100 in range(11, 15):
        return many
    return one if n % 10 == 1 else few if n % 10 in (2, 3, 4) else many


def _below_thousand(n: int, feminine: bool = False) -> list[str]:
    words = [HUNDREDS[n // 100]] if n >= 100 else []
    rest = n % 100
    if 10 <= rest < 20:
        return words + [TEENS[rest - 10]]
    if rest >= 20:
        words.append(TENS[rest // 10])
    if rest % 10:
        unit = rest % 10
        words.append({1: "одна", 2: "две"}[unit] if feminine and unit in (1, 2) else UNITS[unit])
    return words


def number(n: int) -> str:
    """Russian cardinal words (nominative, masculine) for 0..999999."""
    if n == 0:
        return UNITS[0]
    thousands, rest = divmod(n, 1000)
    words = []
    if thousands:
        words += _below_thousand(thousands, feminine=True) + [plural(thousands, "тысяча", "тысячи", "тысяч")]
    return " ".join(words + _below_thousand(rest))


def genitive_ordinal(n: int) -> str:
    """Genitive ordinal for 1..99 ('двадцать первого')."""
    return GENITIVE_ORDINALS.get(n) or f"{TENS[n // 10]} {GENITIVE_ORDINALS[n % 10]}"


def year(y: int) -> str:
    """A year of a date in the genitive, 1950..2019."""
    if y == 2000:
        return "двухтысячного года"
    head = "две тысячи" if y > 2000 else "тысяча девятьсот"
    return f"{head} {genitive_ordinal(y % 100)} года"


def transliterate(word: str) -> str:
    return " ".join(f"{letter}_trans" for letter in "".join(LATIN[c] for c in word.lower()))


def _counts(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.where(rng.random(n) < COMMON_SHARE, rng.integers(0, 100, n), rng.integers(100, 10000, n))


def spelt(word: str) -> str:
    return " ".join(word.lower())


def _plain(rng, n):
    latin = np.flatnonzero(rng.random(n) < LATIN_SHARE)
    word, said = choose(rng, n, WORDS, str)
    word[latin], said[latin] = choose(rng, len(latin), LATIN_WORDS, transliterate)
    return word, said


def _cardinals(rng, n):
    return numbers(_counts(rng, n), str, number, NUMBER_TABLE)


def _dates(rng, n):
    """Half a day and month ('12 февраля' -> 'двенадцатого февраля'), half with the year in the genitive."""
    days, months = rng.integers(*DAYS, n), rng.integers(0, len(MONTHS), n)
    dated = np.flatnonzero(rng.random(n) >= 0.5)
    month = np.asarray(MONTHS, dtype=object)[months]
    day_written, day_said = numbers(days, str, genitive_ordinal, DAYS[1])
    written, said = concat(day_written, " ", month), concat(day_said, " ", month)
    year_written, year_said = numbers(rng.integers(*YEARS, len(dated)), str, year, YEARS[1])
    written[dated], said[dated] = concat(written[dated], " ", year_written), concat(said[dated], " ", year_said)
    return written, said


def _letters(rng, n):
    latin = np.flatnonzero(rng.random(n) < LATIN_ACRONYM_SHARE)
    word, said = choose(rng, n, ACRONYMS, spelt)
    word[latin], said[latin] = choose(rng, len(latin), LATIN_ACRONYMS, transliterate)
    return word, said


def written_rubles(n: int) -> str:
    return f"{n} руб."


def rubles(n: int) -> str:
    return f"{number(n)} {plural(n, 'рубль', 'рубля', 'рублей')}"


def _money(rng, n):
    amount = np.where(rng.random(n) < 0.7, rng.integers(1, 30, n), rng.integers(30, 5000, n))
    return numbers(amount, written_rubles, rubles, NUMBER_TABLE)


_date = one(_dates)  # a single date, as the replica draws them
RUSSIAN = Language(prefix="ru", title="Text Normalization Challenge - Russian Language", words=WORDS, punct=PUNCT,
                   makers={"PLAIN": _plain, "CARDINAL": _cardinals, "DATE": _dates, "LETTERS": _letters,
                           "MONEY": _money}, mix=MIX, range_word="до", real_tokens=REAL_TOKENS)


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test tokens at `scale`: a factor of the replica's own, or 'real'."""
    return text_norm.counts(RUSSIAN, scale)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (ru_*.csv.zip, description.md) and prepared/private (answers.csv, sample)."""
    generate_replica(root, rng, RUSSIAN, scale)
