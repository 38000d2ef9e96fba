"""Text normalisation learned from the training pairs alone (written token -> spoken form), for the tokens a plain
lookup has never seen. No word of any language is written here: every word comes from train.

- the lookup: each token's most frequent spoken form, and where a token has several, the one most frequent with
  the same neighbours (the context lookup);
- letters: an upper-case token spoken letter by letter ("BBC" -> "b b c"), each letter's word learned from the
  acronyms train spells;
- numbers: a place-value grammar induced from the digit tokens train speaks: the words of 0-99 (a ten and a unit
  put side by side where 37 itself was never seen), of each hundred and of each count of thousands, each learned as
  the words a seen number puts before the words of its rest (and, where train shows one word that every hundred
  or thousand adds to its count's words, that word for the counts it never showed);
- ordinals ("12th"): the number's words with their last word changed as train changes it ("two" -> "second");
- years (a 4-digit token train speaks as two 2-digit halves, "1984" -> "nineteen eighty four"): that rule, when it
  holds for every such year train shows;
- money and measures ("$111", "5 руб.", "12 km"): the amount's words and the unit's word train puts after them,
  chosen by whether the amount is one, its last digit and whether it is a teen (as plurals go);
- dates ("12 March 1987", "12 февраля"): the words train puts around the day (the day's number with its last word
  changed as train's dates change it: "twelve" -> "twelfth", "двенадцать" -> "двенадцатого"), the month as train
  speaks it, and the year as the words of its century (by century, and whether the rest is below ten) before the
  rest's words (last word changed as train's years change it) and the words train puts after them.
"""
from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from typing import Callable

import numpy as np
import pandas as pd

DIGITS = re.compile(r"^\d{1,7}$")
ORDINAL = re.compile(r"^(\d{1,7})([^\d\s]{1,4})$")
CAPITALS = re.compile(r"^[^\W\d_]{2,8}$")
YEAR = re.compile(r"^(1[0-9]|20)(\d\d)$")
MONEY = re.compile(r"^(\D{1,3})(\d{1,7})$|^(\d{1,7}) (\S{1,6})$")  # "$111" or "5 руб."
DATE = re.compile(r"^(\d{1,2}) ([^\W\d_]{3,12}\.?)(?: (\d{4}))?$")  # "12 March 1987", "12 февраля"


def _most_frequent(pairs: pd.DataFrame, keys: list[str]) -> pd.Series:
    counts = pairs.groupby([*keys, "after"]).size().rename("n").reset_index()
    best = counts.sort_values([*keys, "n"], ascending=[True] * len(keys) + [False]).drop_duplicates(keys)
    return best.set_index(keys)["after"]


def _forms(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per written token: its most frequent spoken form (`first`), the next one (`second`, NaN where train spoke
    it one way), how often train showed it (`seen`) and the first form's share of those (`share`)."""
    counts = pairs.groupby(["before", "after"]).size().rename("n").reset_index()
    ranked = counts.sort_values(["before", "n"], ascending=[True, False])
    place = ranked.groupby("before").cumcount()
    first, second = ranked[place == 0].set_index("before"), ranked[place == 1].set_index("before")
    seen = ranked.groupby("before")["n"].sum()
    return pd.DataFrame({"first": first["after"], "second": second["after"].reindex(first.index), "seen": seen,
                         "share": first["n"] / seen})


class Numbers:
    """Cardinal numbers from the digit tokens of train (see the module's docstring)."""

    def __init__(self, spoken: dict[int, str]):
        self.seen = spoken
        self.small = {n: w for n, w in spoken.items() if n < 100}
        tens = {n // 10: w for n, w in self.small.items() if n >= 20 and n % 10 == 0}
        for n, words in spoken.items():  # "seventy" from "... seventy four" where 4 is "four" and 70 unseen
            last = n % 100
            said = words.split()
            if last >= 20 and last % 10 and len(said) >= 2 and said[-1] == self.small.get(last % 10):
                tens.setdefault(last // 10, said[-2])
            elif last >= 20 and last % 10 == 0 and n >= 100 and said:
                tens.setdefault(last // 10, said[-1])
        for n in range(20, 100):  # a ten and a unit side by side, where train never spoke n itself
            if n not in self.small and n // 10 in tens and (n % 10 == 0 or n % 10 in self.small):
                self.small[n] = tens[n // 10] + (f" {self.small[n % 10]}" if n % 10 else "")
        self.hundreds = self._heads(100, 10)
        self.thousands = self._heads(1000, 1000)

    def _heads(self, unit: int, counts: int) -> dict[int, str]:
        """For each count c < counts, the words of c * unit before the rest's words, from the numbers train spoke;
        then, where every learned head is its count's words plus one shared word, that rule for the others."""
        heads: dict[int, str] = {}
        for n, words in sorted(self.seen.items()):
            count, rest = divmod(n, unit)
            if not 1 <= count < counts:
                continue
            tail = self.say(rest) if rest else ""
            if rest == 0:
                heads.setdefault(count, words)
            elif tail and words.endswith(" " + tail):
                heads.setdefault(count, words[: -len(tail) - 1])
        shared = {h[len(said) + 1:] if (said := self._count(c, unit)) and h.startswith(said + " ") else None
                  for c, h in heads.items()}
        if len(heads) >= 2 and len(shared) == 1 and None not in shared:  # every head: its count's words + one word
            word = shared.pop()
            for count in range(1, counts):
                if count not in heads and (said := self._count(count, unit)):
                    heads[count] = f"{said} {word}"
        return heads

    def _count(self, count: int, unit: int) -> str | None:
        return self.small.get(count) if unit == 100 else self.say(count)

    def say(self, n: int) -> str | None:
        """The words of n, or None where train did not teach enough of them."""
        if n in self.seen:
            return self.seen[n]
        if n < 100:
            return self.small.get(n)
        unit, heads = (100, self.hundreds) if n < 1000 else (1000, self.thousands)
        count, rest = divmod(n, unit)
        head = heads.get(count) if unit == 100 or count < 1000 else None
        if head is None:
            return None
        if rest == 0:
            return head
        tail = self.say(rest)
        return f"{head} {tail}" if tail else None


class Shapes:
    """The training pairs (before, after), each distinct written token tried on a pattern once: a token recurs
    tens of times in millions, and a pattern tried per row (or pandas' string array walked a row at a time) was
    most of a normaliser's minutes at the real size."""

    def __init__(self, pairs: pd.DataFrame):
        self.before, self.after = (pairs[c].to_numpy(dtype=object) for c in ("before", "after"))
        self.codes, self.unique = pd.factorize(self.before)

    def rows(self, shaped: Callable[[str], object]) -> np.ndarray:
        """The rows whose written token is `shaped` (a pattern's match, or any test of a string), in train's order."""
        hit = np.fromiter((bool(shaped(t)) for t in self.unique), bool, len(self.unique))
        return np.flatnonzero(hit[self.codes])

    def matching(self, shaped: Callable[[str], object]) -> zip:
        """(before, after) of the rows whose written token is `shaped`, in train's order."""
        rows = self.rows(shaped)
        return zip(self.before[rows], self.after[rows])


def _learn_letters(shapes: Shapes) -> dict[str, str]:
    """Each letter's spoken word, from tokens of capitals that train speaks as one word a letter."""
    votes: dict[str, Counter] = defaultdict(Counter)
    for before, after in shapes.matching(lambda t: CAPITALS.match(t) and t.isupper()):
        words = after.split()
        if len(words) == len(before):
            for letter, word in zip(before, words):
                votes[letter][word] += 1
    return {letter: counted.most_common(1)[0][0] for letter, counted in votes.items()}


def _learn_last_words(shapes: Shapes, numbers: Numbers) -> tuple[dict[str, str], set[str]]:
    """How an ordinal changes its number's last word ("two" -> "second"), and the suffixes ordinals carry."""
    changes: dict[str, Counter] = defaultdict(Counter)
    suffixes = set()
    for before, after in shapes.matching(ORDINAL.match):
        if (match := ORDINAL.match(before)) and (said := numbers.say(int(match.group(1)))):
            words, spoken = said.split(), after.split()
            if len(words) == len(spoken) and words[:-1] == spoken[:-1]:
                changes[words[-1]][spoken[-1]] += 1
                suffixes.add(match.group(2))
    return {word: counted.most_common(1)[0][0] for word, counted in changes.items()}, suffixes


def _money_key(n: int) -> tuple:
    """What a currency's word may depend on: one or not, the last digit and whether it is a teen (plurals)."""
    return n == 1, n % 10, 10 <= n % 100 < 20


def _money(token: str) -> tuple[str, int] | None:
    """(currency, amount) of "$111" or "5 руб.", or None."""
    if not (match := MONEY.match(token)):
        return None
    return (match.group(1), int(match.group(2))) if match.group(1) else (match.group(4), int(match.group(3)))


def _learn_currencies(shapes: Shapes, numbers: Numbers) -> dict[tuple, str]:
    """A currency's spoken word after the amount's words, by (currency, _money_key) and by (currency, one or
    not): "$" -> "dollar" / "dollars", "руб." -> "рубль" / "рубля" / "рублей"."""
    votes: dict[tuple, Counter] = defaultdict(Counter)
    for before, after in shapes.matching(MONEY.match):
        if (found := _money(before)) and (said := numbers.say(found[1])) and after.startswith(said + " "):
            word = after[len(said) + 1:]
            key = _money_key(found[1])
            votes[(found[0], *key)][word] += 1
            votes[(found[0], key[0])][word] += 1
    return {key: counted.most_common(1)[0][0] for key, counted in votes.items()}


class Endings:
    """How words change, learned as changes of their endings: "пятнадцать" -> "пятнадцатого" teaches that a
    word ending in "ь" may end in "ого" instead, so "шесть" -> "шестого" where train never changed "шесть". A
    word seen changed keeps its own change; another takes the change of the longest ending it shares with seen
    words, only where every seen word with that ending changed it alike (else, or with no ending shared, it is
    left alone: None). "five" is left alone where "one" -> "first" and "three" -> "third" disagree on "e"."""

    def __init__(self, changes: dict[str, str]):
        self.words = dict(changes)
        votes: dict[str, set] = defaultdict(set)
        for word, changed in changes.items():
            common = len(os.path.commonprefix([word, changed]))
            for start in range(min(common + 1, len(word))):  # every non-empty ending that holds the changed part
                votes[word[start:]].add((len(word) - common, changed[common:]))
        self.endings = {ending: rules.pop() if len(rules) == 1 else None for ending, rules in votes.items()}

    def get(self, word: str) -> str | None:
        if word in self.words:
            return self.words[word]
        for start in range(len(word)):  # the longest ending first; a disputed one ends the search
            if word[start:] in self.endings:
                rule = self.endings[word[start:]]
                return None if rule is None else word[:len(word) - rule[0]] + rule[1]
        return None


def _changed(words: list[str], changes) -> list[str] | None:
    """`words` with the last one changed as `changes` says (None where it says nothing of that word)."""
    last = changes.get(words[-1]) if words else None
    return [*words[:-1], last] if last is not None else None


def _all_last_words(numbers: Numbers) -> set[str]:
    """The last word of every number below 100 train taught."""
    return {said.split()[-1] for said in numbers.small.values() if said}


def _winner(votes: Counter):
    return votes.most_common(1)[0][0] if votes else None


class Dates:
    """Day-month(-year) dates, each part learned from the dates train speaks (see the module's docstring)."""

    def __init__(self, shapes: Shapes, numbers: Numbers, ordinal_changes: dict[str, str]):
        self.numbers, samples, self.months = numbers, [], set()
        for before, after in shapes.matching(DATE.match):
            if (match := DATE.match(before)) and (day := numbers.say(int(match.group(1)))):
                words, month = after.split(), match.group(2).casefold()
                if month in words[1:]:  # the month as written, in train's case: the only month rule learned
                    at = words.index(month, 1)
                    samples.append((day.split(), words[:at], words[at + 1:], match.group(3)))
                    self.months.add(match.group(2))
        self.around = _winner(Counter(s for day, prefix, *_ in samples for s in self._splits(day, prefix)))
        # a day's last word never seen in a date changes as an ordinal's does, where train has ordinals
        self.day_changes = {**ordinal_changes,
                            **self._changes((day, self._day_words(prefix)) for day, prefix, *_ in samples)}
        years = [(int(y), suffix) for *_, suffix, y in samples if y and int(y) % 100]
        self.trailer = _winner(Counter(t for y, suffix in years for t in self._trailers(y, suffix)))
        self.year_changes = self._changes((self._rest(y), self._rest_words(y, suffix)) for y, suffix in years)
        # where every change seen keeps the word (English years), an unseen last word is kept too; where every
        # change seen is the day's (Russian genitives), the day's changes serve the year's unseen words
        if len(self.year_changes) >= 2 and all(k == v for k, v in self.year_changes.items()):
            self.year_changes = {**{word: word for word in _all_last_words(numbers)}, **self.year_changes}
        elif self.year_changes and all(self.day_changes.get(k) == v for k, v in self.year_changes.items()):
            self.year_changes = {**self.day_changes, **self.year_changes}
        self.day_changes, self.year_changes = Endings(self.day_changes), Endings(self.year_changes)
        centuries: dict[tuple, Counter] = defaultdict(Counter)
        for y, suffix in years:
            if (rest := self._rest(y)) and self.trailer is not None:
                centuries[self._century_key(y)][tuple(suffix[:len(suffix) - len(rest) - len(self.trailer)])] += 1
        self.centuries = {key: list(_winner(votes)) for key, votes in centuries.items() if _winner(votes)}

    @staticmethod
    def _splits(day: list[str], prefix: list[str]):
        """Every (words before the day, words after it) that leaves the day's words, but its last, as they are."""
        for lead in range(len(prefix) - len(day) + 1):
            if prefix[lead:lead + len(day) - 1] == day[:-1]:
                yield tuple(prefix[:lead]), tuple(prefix[lead + len(day):])

    def _day_words(self, prefix: list[str]) -> list[str] | None:
        if self.around is None or len(prefix) <= len(self.around[0]) + len(self.around[1]):
            return None
        return prefix[len(self.around[0]):len(prefix) - len(self.around[1])]

    def _rest(self, year: int) -> list[str] | None:
        said = self.numbers.say(year % 100)
        return said.split() if said else None

    def _trailers(self, year: int, suffix: list[str]):
        rest = self._rest(year)
        for end in range(len(suffix) - len(rest or []) + 1) if rest else ():
            start = len(suffix) - end - len(rest)
            if start >= 1 and suffix[start:start + len(rest) - 1] == rest[:-1]:
                yield tuple(suffix[len(suffix) - end:])

    def _rest_words(self, year: int, suffix: list[str]) -> list[str] | None:
        rest = self._rest(year)
        if not rest or self.trailer is None or len(suffix) < len(rest) + len(self.trailer) + 1:
            return None
        return suffix[len(suffix) - len(self.trailer) - len(rest):len(suffix) - len(self.trailer)]

    @staticmethod
    def _changes(pairs) -> dict[str, str]:
        """How a number's last word changes, by vote, from (the number's words, the words train said) pairs."""
        votes: dict[str, Counter] = defaultdict(Counter)
        for words, said in pairs:
            if words and said and len(words) == len(said) and words[:-1] == said[:-1]:
                votes[words[-1]][said[-1]] += 1
        return {word: _winner(counted) for word, counted in votes.items()}

    @staticmethod
    def _century_key(year: int) -> tuple[int, bool]:
        return year // 100, year % 100 < 10

    def say(self, token: str) -> str | None:
        match = DATE.match(token)
        if match.group(2) not in self.months:  # "5 руб." has the shape of a date; only train's months make one
            return None
        day = self.numbers.say(int(match.group(1)))
        day = _changed(day.split(), self.day_changes) if day and self.around else None
        if day is None:
            return None
        words = [*self.around[0], *day, *self.around[1], match.group(2).casefold()]
        if match.group(3):
            year = int(match.group(3))
            century, rest = self.centuries.get(self._century_key(year)), self._rest(year)
            rest = _changed(rest, self.year_changes) if rest and year % 100 else None
            if century is None or rest is None:
                return None
            words += [*century, *rest, *self.trailer]
        return " ".join(words)


class Normalizer:
    """Learned from a training table (sentence_id, before, after); `speak` normalises a test table."""

    def __init__(self, train: pd.DataFrame):
        pairs = train[["before", "after"]].astype(str)
        self.forms = _forms(pairs)
        self.lookup = self.forms["first"]
        context = self._context(train)
        ambiguous = set(self.forms.index[self.forms["second"].notna()])  # spoken more than one way
        self.context = _most_frequent(context[context["before"].isin(ambiguous)], ["previous", "before", "next"])
        shapes = Shapes(pairs)
        digits = pairs.iloc[shapes.rows(DIGITS.match)]
        digits = digits[~digits["after"].str.contains(r"\d")]
        # 4-digit tokens that may be years are left out: "1984" as a year is not the number's words
        self.numbers = Numbers({int(b): a for b, a in _most_frequent(digits, ["before"]).items()
                                if not YEAR.match(b) or 2000 <= int(b) < 2010})
        self.years = self._years(digits)
        self.letters = _learn_letters(shapes)
        self.last_words, self.ordinal_suffixes = _learn_last_words(shapes, self.numbers)
        self.currencies = _learn_currencies(shapes, self.numbers)
        self.dates = Dates(shapes, self.numbers, self.last_words)

    @staticmethod
    def _context(frame: pd.DataFrame) -> pd.DataFrame:
        """Each token with the tokens before and after it in its sentence ('' at the ends)."""
        frame = frame.astype({"before": str})
        by_sentence = frame.groupby("sentence_id")["before"]
        return frame.assign(previous=by_sentence.shift(1).fillna(""), next=by_sentence.shift(-1).fillna(""))

    def _years(self, digits: pd.DataFrame) -> bool:
        """Whether train speaks every 4-digit token of 1000-1999 (and 2010-2099) as its two halves."""
        held = []
        for before, after in zip(*(digits[c].to_numpy(dtype=object) for c in ("before", "after"))):
            match = YEAR.match(before)
            if match and not 2000 <= int(before) < 2010 and int(match.group(2)) >= 10:
                high, low = (self.numbers.say(int(g)) for g in match.groups())
                if high and low:  # a year whose halves train taught
                    held.append(after == f"{high} {low}")
        return len(held) >= 2 and all(held)

    def rule(self, token: str) -> str | None:
        """What the learned rules say for a token the lookup never saw (None: nothing)."""
        if DIGITS.match(token):
            match = YEAR.match(token)
            if self.years and match and not 2000 <= int(token) < 2010 and int(match.group(2)) >= 10:
                high, low = (self.numbers.say(int(g)) for g in match.groups())
                if high and low:
                    return f"{high} {low}"
            return self.numbers.say(int(token))
        if (match := ORDINAL.match(token)) and match.group(2) in self.ordinal_suffixes:
            said = self.numbers.say(int(match.group(1)))
            words = said.split() if said else []
            if words and words[-1] in self.last_words:
                return " ".join([*words[:-1], self.last_words[words[-1]]])
            return None
        if DATE.match(token) and (said := self.dates.say(token)):
            return said
        if (found := _money(token)) and (said := self.numbers.say(found[1])):
            key = _money_key(found[1])
            word = self.currencies.get((found[0], *key)) or self.currencies.get((found[0], key[0]))
            return f"{said} {word}" if word else None
        if CAPITALS.match(token) and token.isupper() and all(c in self.letters for c in token):
            return " ".join(self.letters[c] for c in token)
        return None

    def look_up(self, before: pd.Series) -> pd.Series:
        """The plain lookup alone (else the token itself): what the rules are measured against."""
        return before.astype(str).map(self.lookup).fillna(before.astype(str))

    def speak(self, test: pd.DataFrame) -> pd.Series:
        """Each test token's spoken form: the context lookup for tokens train spoke in several ways, the lookup,
        the learned rules for the rest, else the token itself."""
        context = self._context(test)
        said = test["before"].astype(str).map(self.lookup)
        if len(self.context):
            keys = pd.MultiIndex.from_frame(context[["previous", "before", "next"]])
            said = pd.Series(self.context.reindex(keys).to_numpy(), index=test.index).fillna(said)
        unseen = said.isna()
        said[unseen] = [self.rule(t) for t in test.loc[unseen, "before"].astype(str)]
        return said.fillna(test["before"].astype(str))
