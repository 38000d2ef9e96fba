"""Answers found in a document or left blank: a predicted answer (a token span `start:end`, `YES`, `NO`, or
blank for "no answer") is right when it is one of the row's valid answers, or when it is blank and the row has none.

Scored as the TensorFlow 2.0 Question Answering grader scores it: each row is a 0/1 truth (right or not) beside a
0/1 prediction (answered or not), and the micro-averaged F1 of those labels, which for one label per row is the
share of rows that are right.
"""
from __future__ import annotations

from runner.common.errors import InvalidSubmissionError

WORD_ANSWERS = ("YES", "NO")


def parsed(text: str):
    """A prediction as the grader reads it: (start, end) of a span, YES, NO, or "" for blank."""
    text = str(text).strip()
    parts = text.split(":")
    if len(parts) == 2:
        try:
            return int(parts[0]), int(parts[1])
        except ValueError as exc:  # '3:x': the grader's int() fails
            raise InvalidSubmissionError(f"answer {text!r}: a span's ends must be integers") from exc
    if text in (*WORD_ANSWERS, ""):
        return text
    raise InvalidSubmissionError(f"answer {text!r} is none of 'start:end', YES, NO or blank")


def answered_share(truth, pred) -> float:
    """The share of rows answered right: `truth` holds each row's valid answers (spans as (start, end) pairs,
    YES/NO as strings; empty where the row has none), `pred` each row's prediction as written."""
    right = 0
    for valid, guess in zip(truth, pred):
        answer = parsed(guess)
        valid = [tuple(v) if isinstance(v, (list, tuple)) else v for v in valid]
        right += (answer in valid) if answer != "" else not valid
    return right / len(truth) if len(truth) else 0.0
