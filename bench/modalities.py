"""The competitions no table, photo or text engine trains, on their replicas: the runner against the rule baseline
it wrote before it had an engine for them, and against the field's textbook reference.

The two audio replicas: the right-whale challenge (300 training AIFF clips, faint up-calls among tone and sweep
distractors, ROC AUC) and mlsp-2013-birds (128 training recordings, 19 species, pooled ROC AUC over a row per
recording and species). Their rule baselines were the training share of each label for every item (whale: a
constant, AUC 0.5); the textbook reference is a linear model on each clip's mean log-mel bands (the same
decoding, a model that sees no time order): logistic regression, or ridge with an output per species. And the
image-to-image replica, denoising-dirty-documents (32 stained training pages and their clean twins, pixel RMSE):
its rule baseline was every test pixel as noisy as it is; the textbook reference a straight line from the noisy
intensity to the clean one. And the two text-normalization replicas (300 training sentences each, exact-match
accuracy): their rule baseline was the train lookup alone (the runner's learned normaliser extends it, and the
table engines learn which of each token's candidates to say), the textbook reference every token copied as written
(the sample submission). In one run, on this machine, for each
replica and budget:
- the runner: `runner run` in its own process, graded with MLE-bench's rules;
- the rule baseline and the reference, fitted on all the training clips;
- the runner's best single member (best CV of those whose folds all finished).
Each row keeps the runner's edge over every other contestant with its 90% interval over paired resamples of the
test rows. Goal: at 60 s ahead of the rule baseline beyond the noise and never behind the reference beyond it; at
300 s ahead of both beyond the noise and ahead of its own 60 s score; wall <= budget.

    python modalities.py [--budgets 60 300] [--only whale birds denoising text-norm-en text-norm-ru]

Writes bench/results/modalities.json in the quality bench's row format (`task` audio, image_to_image or
text_normalization).
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _common import RESULTS, save_goals
from finetune import best_member
from quality import commit, graded, judge, run_runner
from runner.data.loading import load_dataset
from runner.demo import write_demo
from runner.common.metrics import LOWER_IS_BETTER, better
from runner.data.sounds import spectrograms
from runner.competition.catalog import load_spec

SEED = 0


def _submissions(spec, public: Path, private: Path, work: Path, contestants, classes) -> dict:
    """Each (name, values per test item, fit seconds) as (row entry, the submission built and graded)."""
    from runner.results.submission import Predictions, build_submission

    sample, out = pd.read_csv(public / spec.sample_submission), {}
    for name, values, seconds in contestants:
        frame = build_submission(sample, spec, list(spec.targets),
                                 Predictions(values, tuple(classes) if classes else None, name))
        out[name] = (dict(score=graded(frame, spec, private, work), seconds=round(seconds, 2)), frame)
    return out


def audio_references(spec, public: Path, private: Path, work: Path) -> dict[str, tuple[dict, pd.DataFrame]]:
    """The rule baseline the competition had (the training share of each label, every item) and the textbook
    reference (logistic regression on mean log-mel bands; ridge, one output per label, for several labels)."""
    from sklearn.linear_model import LogisticRegression, RidgeCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    dataset = load_dataset(spec, public, work / "load")
    train, test = dataset.views["audio"]
    spectra, _ = spectrograms(list(train) + list(test), work / "load", workers=2)
    bands = np.asarray(spectra, dtype=np.float32).mean(axis=2)
    n, classes = len(train), dataset.classes
    if classes is None:  # 0/1 columns
        share = np.tile(dataset.y.mean(axis=0), (len(test), 1))
        model = make_pipeline(StandardScaler(), RidgeCV(alphas=tuple(np.logspace(-2, 4, 13))))
    else:
        share = np.tile(np.bincount(dataset.y, minlength=len(classes)) / len(dataset.y), (len(test), 1))
        model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))
    started = time.monotonic()
    model.fit(bands[:n], dataset.y)
    fitted = time.monotonic() - started
    textbook = model.predict(bands[n:]) if classes is None else model.predict_proba(bands[n:])
    return _submissions(spec, public, private, work, [("rule_baseline", share, 0.0),
                                                      ("textbook", textbook, fitted)], classes)


def pixel_references(spec, public: Path, private: Path, work: Path) -> dict[str, tuple[dict, pd.DataFrame]]:
    """The rule baseline the competition had (every test pixel as noisy as it is) and the textbook reference (a
    straight line from the noisy intensity to the clean one: the page lightened and its contrast stretched)."""
    from sklearn.linear_model import LinearRegression

    dataset = load_dataset(spec, public, work / "load")
    train, test = dataset.views["table"]
    started = time.monotonic()
    line = LinearRegression().fit(train[["w22"]], dataset.y)
    fitted = time.monotonic() - started
    return _submissions(spec, public, private, work, [("rule_baseline", test[["w22"]].to_numpy(), 0.0),
                                                      ("textbook", line.predict(test[["w22"]]), fitted)], None)


def verdict(row: dict, spec, score_60: float | None) -> None:
    """The goal above, from judge()'s edges."""
    edges = {k: row[k].get("runner_edge", {}) for k in ("rule_baseline", "textbook")}
    ahead = {k: e.get("low") is not None and e["low"] > 0 for k, e in edges.items()}
    not_behind = edges["textbook"].get("high", -1.0) >= 0
    in_time = row["runner"]["wall"] <= row["budget"]
    if row["budget"] >= 300:
        further = score_60 is None or better(spec.metric, row["runner"]["score"], score_60)
        row["goal_met"] = all(ahead.values()) and further and in_time
    else:
        row["goal_met"] = ahead["rule_baseline"] and not_behind and in_time


def kept_rows(fresh: list[dict]) -> list[dict]:
    """The last results' rows of the replicas not run this time, then the fresh ones, in REPLICAS order."""
    path = RESULTS / "modalities.json"
    names = {r["dataset"] for r in fresh}
    old = [r for r in json.loads(path.read_text())["rows"] if r["dataset"] not in names] if path.exists() else []
    order = list(REPLICAS)
    return sorted(old + fresh, key=lambda r: (order.index(r["dataset"]) if r["dataset"] in order else 99,
                                              r["budget"]))


def text_references(spec, public: Path, private: Path, work: Path) -> dict[str, tuple[dict, pd.DataFrame]]:
    """The rule the competition had (each token's most frequent spoken form in train, else the token), the sample
    itself (every token copied as written), which is what the field starts from, and the normaliser learned from
    train alone (the runner's submission before its engines chose among candidates; now its class prior)."""
    from runner.data.reading import read_table
    from runner.data.textnorm.rules import Normalizer

    train = read_table(public / spec.train_file, "train file", public)
    test = read_table(public / spec.test_file, "test file", public)
    sample = read_table(public / spec.sample_submission, "sample", public)
    ids = test["sentence_id"].astype(str) + "_" + test["token_id"].astype(str)
    started = time.monotonic()
    normalizer = Normalizer(train)
    looked_up = pd.Series(normalizer.look_up(test["before"]).to_numpy(), index=ids.to_numpy())
    fitted = time.monotonic() - started
    spoken = pd.Series(normalizer.speak(test).to_numpy(), index=ids.to_numpy())
    out = {}
    for name, values, seconds in (("rule_baseline", looked_up, fitted),
                                  ("textbook", pd.Series(test["before"].astype(str).to_numpy(), index=ids), 0.0),
                                  ("normaliser", spoken, time.monotonic() - started)):
        frame = sample.assign(**{spec.targets[0]: sample[spec.id_column].astype(str).map(values).to_numpy()})
        out[name] = (dict(score=graded(frame, spec, private, work), seconds=round(seconds, 2)), frame)
    return out


# name: (competition, its references, task)
REPLICAS = {"whale": ("the-icml-2013-whale-challenge-right-whale-redux", audio_references, "audio"),
            "birds": ("mlsp-2013-birds", audio_references, "audio"),
            "denoising": ("denoising-dirty-documents", pixel_references, "image_to_image"),
            "text-norm-en": ("text-normalization-challenge-english-language", text_references, "text_normalization"),
            "text-norm-ru": ("text-normalization-challenge-russian-language", text_references, "text_normalization")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[60, 300])
    parser.add_argument("--only", nargs="*", choices=list(REPLICAS), help="these replicas; the others' rows are kept")
    args = parser.parse_args()
    at, rows = commit(), []
    with tempfile.TemporaryDirectory(prefix="modalities-") as tmp:
        tmp = Path(tmp)
        specs = Path(__file__).resolve().parent.parent / "competitions"
        for name, (competition, references, task) in REPLICAS.items():
            if args.only and name not in args.only:
                continue
            spec = load_spec(competition)
            root = write_demo(competition, tmp / "data", seed=SEED)
            public, private = root / "prepared" / "public", root / "prepared" / "private"
            answers = pd.read_csv(private / spec.answers_file)
            score_60 = None
            for budget in sorted(args.budgets):
                work = tmp / "work" / f"{name}-{budget}"
                work.mkdir(parents=True)
                row = dict(dataset=name, source=f"runner demo-data {competition} --seed {SEED}", task=task,
                           commit=at, date=time.strftime("%Y-%m-%d"), metric=spec.metric,
                           lower_is_better=LOWER_IS_BETTER[spec.metric], budget=budget)
                frames = {}
                row["runner"], frames["runner"] = run_runner(root, spec, budget, work, specs)
                for key, (entry, frame) in references(spec, public, private, work).items():
                    row[key], frames[key] = entry, frame
                single, frame = best_member(root, spec, work / "runner", work)
                if single:
                    row["best_member"], frames["best_member"] = single, frame
                judge(row, spec, frames, answers)
                verdict(row, spec, score_60)
                score_60 = row["runner"]["score"] if budget == 60 else score_60
                rows.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(work, ignore_errors=True)
    goal = ("at 60 s ahead of the rule baseline beyond the test rows' noise and never behind the textbook reference "
            "beyond it; at 300 s ahead of both beyond it and of the 60 s score; wall <= budget")
    save_goals("modalities", kept_rows(rows) if args.only else rows, goal)


if __name__ == "__main__":
    main()
