"""A synthetic random-acts-of-pizza: Reddit pizza requests as JSON records with the full Kaggle schema.

Success depends on hardship words in the request text (job, rent, kids, paycheck ...) against idle-craving words
(bored, munchies, drunk ...) and on the requester's comment count at request time. As in the real data,
giver_username_if_known is a username only for some successful requests, and the train-only retrieval fields,
flair and edits leak the outcome. TF-IDF plus the request-time counts reaches an AUC of about 0.8; the all-zero
sample submission scores 0.5.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._words import paragraph, pick, sentence, unique, username

TRAIN_ROWS, TEST_ROWS = 500, 200
REAL_TRAIN, REAL_TEST = 2878, 1162  # MLE-bench's split of the 4,040 original train records
MIN_ROWS = 50  # at the smallest factors, enough requests that some succeed in each split
FIRST_REQUEST, LAST_REQUEST, RETRIEVAL = 1291766400, 1380412800, 1380499200  # Dec 2010, Sep 2013, Sep 30 2013
GIVER_KNOWN_RATE = 0.3  # share of successful requests whose giver is named
HARDSHIP = ("job", "rent", "kids", "paycheck", "laid off", "bills", "student", "family", "hungry", "broke",
            "pay it forward", "unemployed", "daughter", "groceries")
CRAVING = ("bored", "munchies", "drunk", "craving", "lazy", "party", "hangover", "movie night", "game night")
TITLES = ("[Request]", "[REQUEST]", "Request:", "[Request] -")
PLACES = ("Ohio", "Texas", "Seattle", "Chicago", "UK", "Florida", "Denver", "Toronto", "NYC", "Oregon")
SUBREDDITS = ("AskReddit", "pics", "funny", "gaming", "IAmA", "Random_Acts_Of_Pizza", "WTF", "todayilearned",
              "videos", "movies", "music", "trees", "atheism", "politics", "food", "Assistance", "loseit")
TEST_FIELDS = (  # the request-time subset that the real test.json keeps
    "giver_username_if_known", "request_id", "request_text_edit_aware", "request_title",
    "requester_account_age_in_days_at_request", "requester_days_since_first_post_on_raop_at_request",
    "requester_number_of_comments_at_request", "requester_number_of_comments_in_raop_at_request",
    "requester_number_of_posts_at_request", "requester_number_of_posts_on_raop_at_request",
    "requester_number_of_subreddits_at_request", "requester_subreddits_at_request",
    "requester_upvotes_minus_downvotes_at_request", "requester_upvotes_plus_downvotes_at_request",
    "requester_username", "unix_timestamp_of_request", "unix_timestamp_of_request_utc")


def _count(rng: np.random.Generator, scale: float, zero_rate: float) -> int:
    return 0 if rng.random() < zero_rate else int(rng.lognormal(np.log(scale), 1.2))


def _request_time(rng: np.random.Generator) -> dict:
    """The requester's history when posting: the fields both train and test carry."""
    utc = float(rng.integers(FIRST_REQUEST, LAST_REQUEST))
    age = 0.0 if rng.random() < 0.2 else round(float(rng.lognormal(np.log(300), 1.1)), 6)
    on_raop = round(float(rng.uniform(0, age)), 6) if rng.random() < 0.1 else 0.0
    minus = _count(rng, 400, 0.2)
    subreddits = sorted(set(pick(rng, SUBREDDITS, _count(rng, 12, 0.25))))
    return {
        "requester_account_age_in_days_at_request": age,
        "requester_days_since_first_post_on_raop_at_request": on_raop,
        "requester_number_of_comments_at_request": _count(rng, 60, 0.25),
        "requester_number_of_comments_in_raop_at_request": _count(rng, 2, 0.85),
        "requester_number_of_posts_at_request": _count(rng, 12, 0.3),
        "requester_number_of_posts_on_raop_at_request": _count(rng, 1, 0.9),
        "requester_number_of_subreddits_at_request": len(subreddits),
        "requester_subreddits_at_request": subreddits,
        "requester_upvotes_minus_downvotes_at_request": minus,
        "requester_upvotes_plus_downvotes_at_request": minus + _count(rng, 300, 0.3),
        "unix_timestamp_of_request": utc + float(rng.choice([0, 0, 0, 3600, -3600, 28800])),
        "unix_timestamp_of_request_utc": utc,
    }


def _texts(rng: np.random.Generator) -> tuple[str, str, float]:
    """Title, edit-aware body and the success logit their words carry."""
    good, bad = pick(rng, HARDSHIP, int(rng.poisson(1.0))), pick(rng, CRAVING, int(rng.poisson(0.8)))
    body = paragraph(rng, good + bad, sentences=(1, 5), length=(5, 14))
    hint = pick(rng, good + bad, 1) if good + bad else []
    title = f"{TITLES[int(rng.integers(len(TITLES)))]} {sentence(rng, hint, (3, 8), end='')}"
    title += f" ({PLACES[int(rng.integers(len(PLACES)))]})" if rng.random() < 0.5 else ""
    return title, body, 1.4 * len(good) - 1.4 * len(bad)


def _retrieval(record: dict, success: bool, rng: np.random.Generator) -> dict:
    """The train-only fields measured when the data set was collected, some of them echoing the outcome."""
    days = (RETRIEVAL - record["unix_timestamp_of_request_utc"]) / 86400
    at = {k: record[f"{k}_at_request"] for k in ("requester_number_of_comments", "requester_number_of_posts",
                                                 "requester_upvotes_minus_downvotes")}
    gained = _count(rng, 200, 0.2)
    edited = success and rng.random() < 0.4
    thanks = record["giver_username_if_known"]
    thanks = "Pizza received, thank you RAOP!" if thanks == "N/A" else f"Thank you so much /u/{thanks}!"
    return {
        "number_of_downvotes_of_request_at_retrieval": int(rng.poisson(1.5)),
        "number_of_upvotes_of_request_at_retrieval": int(rng.poisson(4 + 3 * success)),
        "post_was_edited": (True if rng.random() < 0.5 else record["unix_timestamp_of_request_utc"] + 7200.0)
        if edited else False,
        "request_number_of_comments_at_retrieval": int(rng.poisson(1 + 4 * success)),
        "requester_account_age_in_days_at_retrieval": round(record["requester_account_age_in_days_at_request"]
                                                            + days, 6),
        "requester_days_since_first_post_on_raop_at_retrieval": round(days + record[
            "requester_days_since_first_post_on_raop_at_request"], 6),
        "requester_number_of_comments_at_retrieval": at["requester_number_of_comments"] + gained,
        "requester_number_of_comments_in_raop_at_retrieval": record[
            "requester_number_of_comments_in_raop_at_request"] + int(rng.poisson(1 + 2 * success)),
        "requester_number_of_posts_at_retrieval": at["requester_number_of_posts"] + int(rng.poisson(3)),
        "requester_number_of_posts_on_raop_at_retrieval": record[
            "requester_number_of_posts_on_raop_at_request"] + 1 + int(success and rng.random() < 0.1),
        "requester_upvotes_minus_downvotes_at_retrieval": at["requester_upvotes_minus_downvotes"] + gained,
        "requester_upvotes_plus_downvotes_at_retrieval": record["requester_upvotes_plus_downvotes_at_request"]
        + 2 * gained,
        "requester_user_flair": (("PIF" if rng.random() < 0.06 else "shroom") if success else None),
        "request_text": record["request_text_edit_aware"]
        + (f"\n\nEDIT: {thanks}" if edited else ""),
    }


def _request_id(rng: np.random.Generator, taken: set[str]) -> str:
    """Reddit's t3_ prefix and a base-36 post number, e.g. t3_w5491."""
    return unique(lambda: f"t3_{np.base_repr(int(rng.integers(36 ** 4, 36 ** 6)), 36).lower()}", 1, taken)[0]


def _record(rng: np.random.Generator, taken: set[str]) -> dict:
    request_id = _request_id(rng, taken)
    record = _request_time(rng)
    title, body, logit = _texts(rng)
    logit += -3.0 + 0.45 * np.log1p(record["requester_number_of_comments_at_request"])
    success = bool(rng.random() < 1 / (1 + np.exp(-logit)))
    record.update(request_id=request_id, request_title=title, request_text_edit_aware=body,
                  requester_username=username(rng), requester_received_pizza=success,
                  giver_username_if_known=username(rng) if success and rng.random() < GIVER_KNOWN_RATE else "N/A")
    record.update(_retrieval(record, success, rng))
    return dict(sorted(record.items()))


def _write_json(records: list[dict], public: Path, name: str) -> None:
    (public / f"{name}.json").write_text(json.dumps(records, indent=4))
    shutil.make_archive(str(public / name), "zip", public, f"{name}.json")


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    """Train and test requests at `scale`: a factor of the replica's own, or 'real'."""
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train/test .json and .zip, sampleSubmission.csv) and prepared/private/test.csv.
    A few thousand nested records at most: made one by one, in about a second at the real size."""
    public, private = root / "prepared" / "public", root / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    train_rows, test_rows = counts(scale)
    records = [_record(rng, taken) for _ in range(train_rows + test_rows)]
    train, test = records[:train_rows], records[train_rows:]
    _write_json(train, public, "train")
    _write_json([{k: r[k] for k in TEST_FIELDS} for r in test], public, "test")
    answers = pd.DataFrame({"request_id": [r["request_id"] for r in test],
                            "requester_received_pizza": [int(r["requester_received_pizza"]) for r in test]})
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(requester_received_pizza=0).to_csv(public / "sampleSubmission.csv", index=False)
    describe(public, "Random Acts of Pizza",
             "Predict the probability that a Reddit request for pizza succeeded (requester_received_pizza).",
             "Submissions are evaluated on area under the ROC curve between the predicted probability and the outcome.",
             "Submit request_id,requester_received_pizza for each request in test.json.")
