"""Text normalisation learned from the training pairs: numbers, ordinals, money and letters train never showed are
spoken as train's own examples teach, in English and in Russian, and on held-out sentences the learned rules beat
the lookup alone."""
import numpy as np
import pandas as pd
import pytest

from runner.demo import replica, write_demo
from runner.data.textnorm.rules import Normalizer

en = replica("text-normalization-challenge-english-language")
ru = replica("text-normalization-challenge-russian-language")

RNG = np.random.default_rng(0)


def rubles(n: int) -> str:
    return f"{ru.number(n)} {ru.plural(n, 'рубль', 'рубля', 'рублей')}"


def pairs(rows: list[tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame({"sentence_id": range(len(rows)), "token_id": 0, "before": [b for b, _ in rows],
                         "after": [a for _, a in rows]})


def test_numbers_never_seen_are_composed_from_the_places_train_spoke():
    seen = sorted(set(RNG.choice(10_000, 400, replace=False).tolist()) | set(range(0, 20)))
    unseen = [n for n in range(10_000) if n not in seen and not 1000 <= n < 2100]  # 4-digit years are apart
    normalizer = Normalizer(pairs([(str(n), en.number(n)) for n in seen if not 1000 <= n < 2100]))
    said = {n: normalizer.rule(str(n)) for n in unseen}
    right = [n for n, words in said.items() if words == en.number(n)]
    assert len(right) > 0.95 * len(unseen), [(n, said[n]) for n in unseen if n not in right][:5]
    assert all(words is None or words == en.number(n) for n, words in said.items())  # silent, never wrong


def test_ordinals_years_money_and_letters_follow_trains_examples():
    rows = [(str(n), en.number(n)) for n in range(100)]
    rows += [(f"{n}{en.suffix(n)}", en.ordinal(n)) for n in (1, 2, 3, 4, 5, 8, 9, 12, 20, 21, 30)]
    rows += [(str(y), en.year(y)) for y in (1950, 1984, 1999, 2015, 1962)]
    rows += [(f"${n}", f"{en.number(n)} dollar" + ("" if n == 1 else "s")) for n in (1, 5, 17)]
    rows += [(word, " ".join(word.lower())) for word in ("BBC", "CNN", "FBI", "NASA", "DVD", "UK")]
    normalizer = Normalizer(pairs(rows))
    assert normalizer.rule("32nd") == "thirty second" and normalizer.rule("28th") == "twenty eighth"
    assert normalizer.rule("1977") == "nineteen seventy seven"
    assert normalizer.rule("$42") == "forty two dollars" and normalizer.rule("$1") == "one dollar"
    assert normalizer.rule("CIA") == "c i a" and normalizer.rule("XYZ") is None  # X, Y, Z never spelt in train


def test_russian_thousands_keep_the_forms_train_showed_and_plurals_their_last_digit():
    rows = [(str(n), ru.number(n)) for n in list(range(100)) + [100, 200, 300, 500, 1000, 2000, 5000, 145, 378]]
    rows += [(f"{n} руб.", rubles(n)) for n in (1, 2, 5, 11, 21, 33)]
    normalizer = Normalizer(pairs(rows))
    assert normalizer.rule("2345") == ru.number(2345)  # thousands' form for 2 learned from "2000"
    assert normalizer.rule("4000") is None  # 4 thousand was never shown: no inflection invented
    assert normalizer.rule("44 руб.") == rubles(44) and normalizer.rule("31 руб.") == rubles(31)


@pytest.mark.parametrize("competition", ["text-normalization-challenge-english-language",
                                         "text-normalization-challenge-russian-language"])
def test_on_held_out_sentences_the_learned_rules_beat_the_lookup_alone(competition, tmp_path):
    public = write_demo(competition, tmp_path, seed=3) / "prepared" / "public"
    prefix = competition.split("-")[3][:2]
    train = pd.read_csv(public / f"{prefix}_train.csv.zip", keep_default_na=False)
    sentences = train["sentence_id"].unique()
    out = train["sentence_id"].isin(sentences[np.random.default_rng(1).random(len(sentences)) < 0.3])
    normalizer, truth = Normalizer(train[~out]), train.loc[out, "after"]
    learned = (normalizer.speak(train[out]) == truth).mean()
    alone = (normalizer.look_up(train.loc[out, "before"]) == truth).mean()
    assert learned > alone + 0.01, (learned, alone)


@pytest.mark.parametrize("language", [en, ru])
def test_dates_never_seen_are_spoken_as_trains_dates_teach(language):
    rng = np.random.default_rng(2)
    rows = [(str(n), language.number(n)) for n in range(100)] + [language._date(rng) for _ in range(60)]
    normalizer = Normalizer(pairs(rows))
    seen = {b for b, _ in rows}
    unseen = [(b, a) for b, a in (language._date(rng) for _ in range(300)) if " " in b and b not in seen]
    said = [normalizer.rule(b) for b, _ in unseen]
    assert sum(s == a for s, (_, a) in zip(said, unseen)) > 0.75 * len(unseen)  # 0.83 and 0.91 at this seed
    assert all(s is None or s == a for s, (_, a) in zip(said, unseen))  # silent where unsure, never wrong


def test_a_days_ending_changes_as_trains_days_ending_did():
    rows = [(str(n), ru.number(n)) for n in range(100)]
    rows += [(f"{d} марта", f"{ru.genitive_ordinal(d)} марта") for d in (15, 20, 25, 1, 3)]
    normalizer = Normalizer(pairs(rows))
    assert normalizer.rule("6 марта") == "шестого марта"  # "шесть" never changed in train: its ending "ь" did
    assert normalizer.rule("6 мая") is None  # May never appeared in a date
    assert normalizer.rule("5 руб.") is None  # a date's shape, but no month of train's


def test_measures_take_the_units_word_train_puts_after_the_amount():
    rows = [(str(n), en.number(n)) for n in range(100)]
    rows += [(f"{n} km", f"{en.number(n)} kilometer" + ("" if n == 1 else "s")) for n in (1, 3, 12, 40)]
    rows += [(f"{n} mph", f"{en.number(n)} miles per hour") for n in (30, 55)]
    normalizer = Normalizer(pairs(rows))
    assert normalizer.rule("42 km") == "forty two kilometers" and normalizer.rule("1 km") == "one kilometer"
    assert normalizer.rule("70 mph") == "seventy miles per hour"  # a unit whose shape is a date's, no month
    assert normalizer.rule("42 kg") is None  # a unit train never spoke
