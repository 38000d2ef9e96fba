"""Text normalisation's tokens as a table (runner.data.textnorm): whole sentences of train within what the
budget teaches, and the test tokens in the sample's order."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.common.sampling import SAMPLING_SEED, Sampled
from runner.competition.spec import CompetitionSpec
from runner.data.dataset import Dataset
from runner.data.reading import read_csv, sampled_rows
from runner.data.textnorm.candidates import SOURCES, token_table

log = logging.getLogger(__name__)


MAX_TOKEN_ROWS = 2_000_000  # training tokens the engines learn from at most: ~300 MB of features
# training tokens the candidates' normalisers learn from, per second of budget: five normalisers (four cross-fitted,
# one of all train) learn 6M tokens and the engines' 1.2M rows are made in 47 s on one core here (Russian at its
# real size, 600 s), so loading stays under a tenth of the budget
TAUGHT_PER_BUDGET_SECOND = 10_000


def _sentences_within(train: pd.DataFrame, most: int) -> pd.DataFrame:
    """Whole sentences, drawn at random, up to `most` tokens (a token's neighbours are its features)."""
    sizes = train.groupby("sentence_id", sort=False).size()
    order = sizes.sample(frac=1.0, random_state=SAMPLING_SEED)
    kept = order.index[np.cumsum(order.to_numpy()) <= most]
    return train[train["sentence_id"].isin(kept)]


def token_dataset(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame, columns: list[str],
                   budget_seconds: float | None, memory: int | None) -> Dataset:
    """A row per token: its features, the class of the first candidate that says it right (runner.data.textnorm.candidates). Every
    training token teaches the candidates; the rows the engines learn are whole sentences, as many tokens as the
    budget trains. A training file larger than `memory` bytes (the run's) parses is read as far as they do."""
    warnings: list[str] = []
    train = read_csv(data_dir / spec.train_file, "train file", data_dir, warnings, literal=True, memory=memory)
    cut = train.attrs.get("sampled")  # the file's first rows: said in `warnings` already
    test_path = data_dir / spec.test_file
    test = read_csv(test_path, "test file", data_dir, warnings, literal=True)
    for frame, path, needed in ((train, data_dir / spec.train_file, ("sentence_id", "before", columns[0])),
                                (test, test_path, ("sentence_id", "token_id", "before"))):
        if missing := [c for c in needed if c not in frame.columns]:
            raise InputError(f"{path}: missing column(s) {missing}")
    train[["before", columns[0]]] = train[["before", columns[0]]].fillna("")  # an empty field: an empty token
    if cut and train["sentence_id"].nunique() > 1:  # the file's last sentence read may have lost its end
        train = train[train["sentence_id"] != train["sentence_id"].iloc[-1]]
    if "token_id" in train.columns:  # sentence order: a token's neighbours are its context
        train = train.sort_values(["sentence_id", "token_id"], kind="stable").reset_index(drop=True)
    test["before"] = test["before"].fillna("")
    tokens, where = _test_tokens(test, sample, spec.id_column, columns[0], test_path, warnings)
    most = min(MAX_TOKEN_ROWS, sampled_rows(budget_seconds, None)) if budget_seconds else MAX_TOKEN_ROWS
    rows, sampled, source = train.rename(columns={columns[0]: "after"}), [], str(data_dir / spec.train_file)
    whole = cut.of if cut else len(train)
    if budget_seconds and len(rows) > TAUGHT_PER_BUDGET_SECOND * budget_seconds:
        rows = _sentences_within(rows, int(TAUGHT_PER_BUDGET_SECOND * budget_seconds))
        sampled.append(Sampled(what="training tokens the candidates' normalisers learn from", kept=len(rows),
                               of=whole, how="whole sentences at random", source=source,
                               why=f"what {budget_seconds:.0f} s affords"))
    table = token_table(rows, tokens, learned_from=_sentences_within(rows, most))
    learned = len(table.y) + table.unanswerable
    if learned < whole:
        sampled.append(Sampled(what="training tokens the engines learn from", kept=learned, of=whole,
                               how="whole sentences at random", source=source,
                               why=f"what the budget trains, at most {MAX_TOKEN_ROWS:,}"))
    warnings.extend(s.say() for s in sampled)
    warnings.append(f"{table.unanswerable} of those {learned} training tokens ({table.unanswerable / learned:.1%}) "
                    f"no candidate says right are left out: the CV is the accuracy on the others")
    test_rows = table.x_test.iloc[where].reset_index(drop=True)  # the sample's order
    return Dataset(spec, columns, list(SOURCES), table.y, {"table": (table.x, test_rows)}, warnings,
                   groups=table.groups, choices=table.choices[where], sampled=tuple(s for s in (cut, *sampled) if s))


def _test_tokens(test: pd.DataFrame, sample: pd.DataFrame, id_column: str, value: str, path: Path,
                 warnings: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """The test tokens in sentence order (a token's neighbours are among its features, whatever order the sample
    lists them in), a sentence of its own for each sample id the test table lacks (its sample value the token),
    and where each sample row's token is."""
    test = test.sort_values(["sentence_id", "token_id"], kind="stable").reset_index(drop=True)
    ids = test["sentence_id"].astype(str) + "_" + test["token_id"].astype(str)
    if (twice := ids.duplicated()).any():  # the first of each id is the token the sample's row gets
        warnings.append(f"{path}: {int(twice.sum())} token id(s) given twice (e.g. {ids[twice].iloc[0]!r}): the "
                        f"first of each is spoken")
        test, ids = test[~twice].reset_index(drop=True), ids[~twice].reset_index(drop=True)
    where = pd.Index(ids).get_indexer(sample[id_column].astype(str))
    test = test.astype({"sentence_id": str})
    alone = np.flatnonzero(where < 0)
    if len(alone):
        where[alone] = len(test) + np.arange(len(alone))
        test = pd.concat([test, pd.DataFrame({"sentence_id": [f"alone {k}" for k in range(len(alone))],
                                              "token_id": 0, "before": sample[value].iloc[alone].astype(str)})],
                         ignore_index=True)
        warnings.append(f"{path}: no token for {len(alone)} of the sample's ids (e.g. "
                        f"{sample[id_column].iloc[alone[0]]!r}): each is its sample value, spoken alone")
    return test, where
