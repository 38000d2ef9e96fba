"""A synthetic google-quest-challenge: StackExchange questions with one answer each, rated on 30 qualities, as
MLE-bench lays the competition out (its 90/10 split of the real train.csv): train.csv with the 11 text and page
columns then the 30 targets, test.csv with the 11, the answers in private/test.csv (`qa_id` and the 30), and a
sample whose every target column runs from 0 to 1 down the rows.

Each quality has its own words: a question-side quality shows in the question's title or body, an answer-side one
in the answer. A rating is a rater average on the real grid (0, 1/3, 1/2, 2/3, 1) that rises with how often its
words appear, plus a lean by category (a CULTURE question is more opinion seeking, a STACKOVERFLOW one more
instructions). Train repeats some questions with other answers, as the real one does; every target varies in the
test rows, as prepare.py makes sure. TF-IDF and a ridge per target rank them with a mean Spearman of about 0.3 to
0.5; the sample ranks nothing (about 0).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders
from runner.demo._words import paragraphs, pick, sentence, username

TRAIN_ROWS, TEST_ROWS = 540, 240
REAL_TRAIN, REAL_TEST = 5_471, 608  # MLE-bench's 90/10 split of the 6,079 rated question-answer pairs
MIN_ROWS = 60
REPEAT_RATE = 0.15  # train questions asked again with another answer
GRID = np.array([0.0, 1 / 3, 0.5, 2 / 3, 1.0])  # the rater averages the real targets take
NOISE = 0.12  # of a rating before it is put on the grid
# each target, its words (drawn into the question or the answer), and its level without them
TARGETS = (
    ("question_asker_intent_understanding", ("clearly", "specifically"), 0.8),
    ("question_body_critical", ("context", "details"), 0.55),
    ("question_conversational", ("hey", "folks"), 0.05),
    ("question_expect_short_answer", ("quick", "simply"), 0.5),
    ("question_fact_seeking", ("factual", "exactly"), 0.6),
    ("question_has_commonly_accepted_answer", ("standard", "usual"), 0.55),
    ("question_interestingness_others", ("curious", "fascinating"), 0.55),
    ("question_interestingness_self", ("wonder", "intrigued"), 0.45),
    ("question_multi_intent", ("additionally", "secondly"), 0.2),
    ("question_not_really_a_question", ("rant", "vent"), 0.0),
    ("question_opinion_seeking", ("opinion", "prefer"), 0.4),
    ("question_type_choice", ("either", "choose"), 0.25),
    ("question_type_compare", ("versus", "compare"), 0.05),
    ("question_type_consequence", ("consequence", "happens"), 0.0),
    ("question_type_definition", ("definition", "meaning"), 0.02),
    ("question_type_entity", ("named", "called"), 0.05),
    ("question_type_instructions", ("steps", "configure"), 0.45),
    ("question_type_procedure", ("procedure", "process"), 0.15),
    ("question_type_reason_explanation", ("explain", "rationale"), 0.35),
    ("question_type_spelling", ("spelling", "pronounce"), 0.0),
    ("question_well_written", ("formatted", "carefully"), 0.75),
    ("answer_helpful", ("solved", "helpful"), 0.85),
    ("answer_level_of_information", ("documentation", "reference"), 0.6),
    ("answer_plausible", ("plausible", "works"), 0.9),
    ("answer_relevance", ("relevant", "directly"), 0.9),
    ("answer_satisfaction", ("satisfied", "perfect"), 0.75),
    ("answer_type_instructions", ("execute", "install"), 0.45),
    ("answer_type_procedure", ("initially", "afterwards"), 0.15),
    ("answer_type_reason_explanation", ("hence", "cause"), 0.4),
    ("answer_well_written", ("neatly", "precise"), 0.85),
)
CLASSES = tuple(name for name, _, _ in TARGETS)
RISE = 0.22  # a target's rise per word of its own
CATEGORIES = {"TECHNOLOGY": ("superuser.com", "serverfault.com", "askubuntu.com", "electronics.stackexchange.com"),
              "STACKOVERFLOW": ("stackoverflow.com",),
              "CULTURE": ("english.stackexchange.com", "rpg.stackexchange.com", "ell.stackexchange.com"),
              "SCIENCE": ("physics.stackexchange.com", "math.stackexchange.com", "stats.stackexchange.com"),
              "LIFE_ARTS": ("photo.stackexchange.com", "cooking.stackexchange.com", "diy.stackexchange.com")}
CATEGORY_SHARES = (0.24, 0.21, 0.16, 0.17, 0.22)
LEAN = {"CULTURE": {"question_opinion_seeking": 0.25, "question_type_spelling": 0.15},
        "STACKOVERFLOW": {"question_type_instructions": 0.25, "answer_type_instructions": 0.25},
        "SCIENCE": {"question_fact_seeking": 0.2, "answer_type_reason_explanation": 0.2},
        "LIFE_ARTS": {"question_interestingness_self": 0.15}, "TECHNOLOGY": {"question_type_procedure": 0.15}}


def _cue_draws(n: int, rng: np.random.Generator) -> np.ndarray:
    """How many words of each target each row carries (rows x targets): most none, some one to three."""
    return rng.binomial(3, 0.16, size=(n, len(TARGETS)))


def _ratings(draws: np.ndarray, categories: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    base = np.array([level for _, _, level in TARGETS])
    lean = np.array([[LEAN.get(c, {}).get(name, 0.0) for name in CLASSES] for c in categories])
    raw = base + RISE * draws + lean + rng.normal(0, NOISE, draws.shape)
    return GRID[np.abs(np.clip(raw, 0, 1)[..., None] - GRID).argmin(axis=-1)]


def _texts(draws: np.ndarray, side: str, rng: np.random.Generator, sentences, length) -> list[str]:
    """The question bodies (side 'question') or answers: filler with each row's draws of its targets' words."""
    columns = [j for j, name in enumerate(CLASSES) if name.startswith(side)]
    rows, words = [], []
    for j in columns:
        for count in (1, 2, 3):
            hit = np.flatnonzero(draws[:, j] == count)
            rows.append(np.repeat(hit, count))
            words.append(np.asarray(TARGETS[j][1], dtype=object)[rng.integers(2, size=len(hit) * count)])
    return paragraphs(rng, len(draws), np.concatenate(rows), np.concatenate(words), sentences=sentences,
                      length=length)


def _table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    categories = np.array(list(CATEGORIES))[rng.choice(len(CATEGORIES), size=n, p=CATEGORY_SHARES)]
    hosts = [CATEGORIES[c][int(rng.integers(len(CATEGORIES[c])))] for c in categories]
    draws = _cue_draws(n, rng)
    bodies = _texts(draws, "question", rng, (2, 5), (6, 16))
    answers = _texts(draws, "answer", rng, (1, 5), (6, 18))
    titles = [sentence(rng, [], (4, 10), end="?") for _ in range(n)]
    ids = rng.choice(10 * n, size=n, replace=False)
    askers, answerers = [username(rng) for _ in range(n)], [username(rng) for _ in range(n)]
    users = rng.integers(1, 200_000, size=(n, 2))
    frame = pd.DataFrame({
        "qa_id": ids, "question_title": titles, "question_body": bodies, "question_user_name": askers,
        "question_user_page": [f"https://{h}/users/{u}" for h, u in zip(hosts, users[:, 0])], "answer": answers,
        "answer_user_name": answerers,
        "answer_user_page": [f"https://{h}/users/{u}" for h, u in zip(hosts, users[:, 1])],
        "url": [f"http://{h}/questions/{q}" for h, q in zip(hosts, ids * 7 + 1000)], "category": categories,
        "host": hosts})
    return pd.concat([frame, pd.DataFrame(_ratings(draws, categories, rng), columns=CLASSES)], axis=1)


def _repeat_questions(train: pd.DataFrame, rng: np.random.Generator) -> None:
    """Some train rows ask an earlier row's question (title, body, asker) again, with their own answer."""
    again = np.flatnonzero(rng.random(len(train)) < REPEAT_RATE)
    again = again[again > 0]
    source = (rng.random(len(again)) * again).astype(int)
    for column in ("question_title", "question_body", "question_user_name", "question_user_page", "url", "category",
                   "host", *[c for c in CLASSES if c.startswith("question_")]):
        train.loc[again, column] = train[column].to_numpy()[source]


def _varied_test(train: pd.DataFrame, test: pd.DataFrame) -> None:
    """Every target varies in the test rows: where one does not, a test row (the first not traded yet) trades
    places with a train row of another value, as prepare.py swaps one for the spelling column."""
    traded = 0
    for column in CLASSES:
        if test[column].nunique() > 1:
            continue
        other, row = train.index[train[column] != test[column].iloc[0]][0], test.index[traded]
        test.loc[row], train.loc[other] = train.loc[other].copy(), test.loc[row].copy()
        traded += 1


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    frame = _table(train_rows + test_rows, rng)
    train, test = frame.iloc[:train_rows].copy(), frame.iloc[train_rows:].reset_index(drop=True)
    _repeat_questions(train, rng)
    _varied_test(train, test)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=list(CLASSES)).to_csv(public / "test.csv", index=False)
    test[["qa_id", *CLASSES]].to_csv(private / "test.csv", index=False)
    sample = test[["qa_id"]].copy()
    sample[list(CLASSES)] = np.tile(np.linspace(0, 1, len(test))[:, None], (1, len(CLASSES)))
    sample.to_csv(public / "sample_submission.csv", index=False)
    describe(public, "Google QUEST Q&A Labeling",
             "Predict, for each question-answer pair in test.csv, the 30 subjective qualities raters gave it, each "
             "a value from 0 to 1.",
             "Submissions are evaluated on the mean column-wise Spearman's correlation coefficient.",
             "Submit `qa_id` and the 30 target columns, exactly those 31 columns.")
