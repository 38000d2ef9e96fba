"""A synthetic tensorflow2-question-answering (Natural Questions, simplified): Wikipedia-like pages as
whitespace-separated tokens with their HTML tags, a question on each, and where its answer is, as MLE-bench lays
the competition out (its 90/10 split of the real simplified-nq-train.jsonl, chunk by chunk): JSON Lines
simplified-nq-train.jsonl (every field) and simplified-nq-test.jsonl (`example_id`, `question_text`,
`document_text`, `long_answer_candidates`), the answers in private/test.jsonl with gold_submission.csv, and a
sample of blank answers, two rows per example (`<id>_short` then `<id>_long`).

A page is a title and paragraphs (`<P> ... </P>`, each a long-answer candidate) and a table. The question names a
rare word; on about half the pages one paragraph holds it (the long answer) and, on most of those, a cue and the
short answer right after it (a year or a name); a few questions are answered YES or NO. The grader counts a row
right when its answer is one of the true ones or when it is blank and there is none: blank everywhere (the
sample) scores the share of rows without an answer, about 0.6.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders
from runner.demo._words import FILLER, pick

TRAIN_ROWS, TEST_ROWS = 200, 60
REAL_TRAIN, REAL_TEST = 276_635, 30_738  # MLE-bench's 90/10 split of the 307,373 examples
MIN_ROWS = 20
LONG_RATE, SHORT_RATE, YES_NO_RATE = 0.5, 0.7, 0.04  # pages with a long answer; of those, a short one; yes/no
RARE = ("aurora", "basalt", "citadel", "delta", "ember", "fjord", "glacier", "harbor", "isthmus", "jasper",
        "kestrel", "lagoon", "meridian", "nebula", "obsidian", "prairie", "quartz", "reef", "savanna", "tundra")
CUE = "since"  # the short answer follows it
ASKED = ("when was the {} first recorded", "who named the {}", "how old is the {}", "where is the {} found")


def _paragraph(rng: np.random.Generator, middle: list[str] | None = None) -> list[str]:
    words = pick(rng, [w for w in FILLER if w != CUE], int(rng.integers(8, 30)))
    if middle:
        at = int(rng.integers(1, len(words)))
        words = words[:at] + middle + words[at:]
    return ["<P>", *words, "</P>"]


def _example(rng: np.random.Generator) -> dict:
    rare = RARE[int(rng.integers(len(RARE)))]
    question = ASKED[int(rng.integers(len(ASKED)))].format(rare)
    tokens = ["<H1>", *pick(rng, FILLER, 3), "</H1>"]
    candidates, long_answer, short_answers, yes_no = [], [-1, -1, -1], [], "NONE"
    answered = rng.random() < LONG_RATE
    paragraphs = int(rng.integers(3, 8))
    chosen = int(rng.integers(paragraphs)) if answered else -1
    for k in range(paragraphs):
        short = str(int(rng.integers(1500, 2020))) if rng.random() < 0.5 else pick(rng, ("smith", "khan", "lee"), 1)[0]
        middle = [rare, CUE, short] if k == chosen and rng.random() < SHORT_RATE else ([rare] if k == chosen else None)
        start = len(tokens)
        tokens += _paragraph(rng, middle)
        candidates.append({"start_token": start, "end_token": len(tokens), "top_level": True})
        if k == chosen:
            long_answer = [start, len(tokens), k]
            if middle and len(middle) == 3:
                at = start + tokens[start:].index(CUE) + 1
                short_answers.append({"start_token": at, "end_token": at + 1})
            elif rng.random() < YES_NO_RATE / LONG_RATE:
                yes_no = "YES" if rng.random() < 0.5 else "NO"
    tokens += ["<Table>", "<Tr>", "<Td>", *pick(rng, FILLER, 4), "</Td>", "</Tr>", "</Table>"]
    example_id = str(int(rng.integers(-2**63, 2**63 - 1, dtype=np.int64)))
    return {"document_text": " ".join(tokens), "long_answer_candidates": candidates, "question_text": question,
            "annotations": [{"yes_no_answer": yes_no,
                             "long_answer": {"start_token": long_answer[0], "end_token": long_answer[1],
                                             "candidate_index": long_answer[2]},
                             "short_answers": short_answers,
                             "annotation_id": int(rng.integers(10**17, 10**19, dtype=np.uint64))}],
            "document_url": f"https://en.wikipedia.org//w/index.php?title={rare}&oldid={int(rng.integers(10**8))}",
            "example_id": example_id}


def _gold(answers: pd.DataFrame) -> pd.DataFrame:
    """The perfect submission: the first short answer (or YES/NO) and the long answer, blank where none."""
    rows = []
    for example_id, (annotation,) in zip(answers["example_id"], answers["annotations"]):
        short = annotation["yes_no_answer"] if annotation["yes_no_answer"] != "NONE" else (
            "{start_token}:{end_token}".format(**annotation["short_answers"][0]) if annotation["short_answers"] else "")
        long_answer = annotation["long_answer"]
        whole = f"{long_answer['start_token']}:{long_answer['end_token']}" if long_answer["start_token"] != -1 else ""
        rows += [(f"{example_id}_short", short), (f"{example_id}_long", whole)]
    return pd.DataFrame(rows, columns=["example_id", "PredictionString"])


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (the two JSON Lines files, sample_submission.csv) and prepared/private (test.jsonl,
    gold_submission.csv), as pandas writes JSON Lines records (prepare.py's way: '/' escaped)."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    frame = pd.DataFrame([_example(rng) for _ in range(train_rows + test_rows)])
    train, answers = frame.iloc[:train_rows], frame.iloc[train_rows:].reset_index(drop=True)
    train.to_json(public / "simplified-nq-train.jsonl", orient="records", lines=True)
    answers.to_json(private / "test.jsonl", orient="records", lines=True)
    answers[["example_id", "question_text", "document_text", "long_answer_candidates"]].to_json(
        public / "simplified-nq-test.jsonl", orient="records", lines=True)
    gold = _gold(answers)
    gold.to_csv(private / "gold_submission.csv", index=False)
    gold.assign(PredictionString="").to_csv(public / "sample_submission.csv", index=False)
    describe(public, "TensorFlow 2.0 Question Answering",
             "Answer, for each question in simplified-nq-test.jsonl, with the span of its page that answers it: "
             "a long answer (a paragraph, as 'start:end' tokens) and a short one ('start:end', YES or NO), blank "
             "where the page holds none.",
             "Submissions are evaluated on a micro-averaged F1 over the rows: an answer right, or rightly blank.",
             "Submit `example_id,PredictionString`, a row `<example_id>_short` and a row `<example_id>_long` for "
             "every test question.")
