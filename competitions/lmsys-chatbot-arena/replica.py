"""A synthetic lmsys-chatbot-arena: conversations where two chatbots answered the same prompts and a person chose
the better (or called a tie), as MLE-bench lays the competition out (its 90/10 split of the real train.csv):
train.csv `id,model_a,model_b,prompt,response_a,response_b,winner_model_a,winner_model_b,winner_tie` with the
texts as JSON lists of strings (one per turn; a turn may be null), test.csv with only the id and the three texts,
the answers in private/answers.csv (every train column), and a sample of thirds.

Each response has a quality: a stronger model writes longer answers, with more of the words people reward
("example", "step", ...) and fewer hedges ("unfortunately", "cannot"). The person prefers the better one, more
surely the larger the gap, and calls a tie when the two are close or the same text. The signal is in how the two
responses compare: the difference of their lengths and of their rewarded words; a table of those features learns
it (a log loss near 0.95 where the class prior scores about 1.097).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders
from runner.demo._words import paragraphs, sentence

TRAIN_ROWS, TEST_ROWS = 900, 300
REAL_TRAIN, REAL_TEST = 51_729, 5_748  # MLE-bench's 90/10 split of the 57,477 battles
MIN_ROWS = 60
MODELS = {"gpt-4-1106-preview": 1.0, "gpt-4-0613": 0.8, "claude-2.1": 0.6, "claude-instant-1": 0.3,
          "gpt-3.5-turbo-0613": 0.3, "mixtral-8x7b-instruct-v0.1": 0.4, "llama-2-70b-chat": 0.1,
          "vicuna-13b": -0.1, "llama-2-13b-chat": -0.2, "koala-13b": -0.5}
REWARDED = ("example", "step", "specifically", "detailed", "summary", "clearly", "overall", "recommend")
HEDGES = ("unfortunately", "cannot", "sorry", "unclear", "apologize")
TURNS = (1, 1, 1, 2, 3)  # a conversation's turns, mostly one
NULL_RATE = 0.02  # a response turn that came back empty (null in the JSON)
SAME_RATE = 0.03  # both models answered with the same text
TIE_GAP = 0.35  # a gap of quality below which a tie is likely
SURENESS = 2.2  # how surely the better response wins as the gap grows


def _response(quality: float, rng: np.random.Generator) -> str:
    """One turn's answer: longer, with more rewarded words and fewer hedges, for a higher quality."""
    rewarded = rng.poisson(max(0.2, 1.5 + 1.5 * quality))
    hedges = rng.poisson(max(0.1, 0.8 - 0.8 * quality))
    cues = list(np.asarray(REWARDED)[rng.integers(len(REWARDED), size=rewarded)]) + \
        list(np.asarray(HEDGES)[rng.integers(len(HEDGES), size=hedges)])
    count = int(np.clip(rng.normal(3 + 2.5 * quality, 1.0), 1, 9))
    return paragraphs(rng, 1, np.zeros(len(cues), dtype=int), np.asarray(cues, dtype=object),
                      sentences=(count, count + 1), length=(6, 16))[0]


def _battle(rng: np.random.Generator) -> dict:
    names = list(MODELS)
    a, b = rng.choice(len(names), size=2, replace=False)
    turns = TURNS[int(rng.integers(len(TURNS)))]
    prompts = [sentence(rng, [], (5, 14), end="?") for _ in range(turns)]
    quality = np.array([MODELS[names[a]], MODELS[names[b]]]) + rng.normal(0, 0.5, 2)
    texts = [[_response(q, rng) for _ in range(turns)] for q in quality]
    if rng.random() < SAME_RATE:
        texts[1], quality[1] = list(texts[0]), quality[0]
    for side in texts:
        for k in range(turns):
            side[k] = None if rng.random() < NULL_RATE else side[k]
    gap = quality[0] - quality[1]
    tie = np.exp(-(gap / TIE_GAP) ** 2) * 0.8
    a_wins = (1 - tie) / (1 + np.exp(-SURENESS * gap))
    outcome = rng.choice(3, p=[a_wins, 1 - tie - a_wins, tie])
    return {"model_a": names[a], "model_b": names[b], "prompt": json.dumps(prompts),
            "response_a": json.dumps(texts[0]), "response_b": json.dumps(texts[1]),
            "winner_model_a": int(outcome == 0), "winner_model_b": int(outcome == 1), "winner_tie": int(outcome == 2)}


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/answers.csv."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    n = train_rows + test_rows
    frame = pd.DataFrame([_battle(rng) for _ in range(n)])
    frame.insert(0, "id", rng.choice(np.arange(30_000, 30_000 + 80 * n), size=n, replace=False))
    train, answers = frame.iloc[:train_rows], frame.iloc[train_rows:].reset_index(drop=True)
    train.to_csv(public / "train.csv", index=False)
    answers[["id", "prompt", "response_a", "response_b"]].to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "answers.csv", index=False)
    answers[["id"]].assign(winner_model_a=1 / 3, winner_model_b=1 / 3, winner_tie=1 / 3).to_csv(
        public / "sample_submission.csv", index=False)
    describe(public, "LMSYS - Chatbot Arena Human Preference Predictions",
             "Predict, for each conversation in test.csv, the probability that a person preferred the first "
             "chatbot's responses, the second's, or called a tie.",
             "Submissions are evaluated on the log loss between the predicted probabilities and the ground truth.",
             "Submit `id,winner_model_a,winner_model_b,winner_tie` for every test conversation.")
