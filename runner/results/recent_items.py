"""Items ranked for each person from a log of who took which item when (a shop's purchases): the `recent_items`
rule of runner.results.baselines, where no engine learns a ranking of items.

Each person's own items of their last days come first (the ones they took most, then the latest), then the items
everyone took most in the log's last week, to `top_k`. How many days of a person's own past count (none: the
popular items alone, the honest prior) is chosen on the log itself: its last week is held out, the ranking made
from the days before it is scored on it by MAP@k, and the best length wins; the ranking then comes from the whole
log. The items are written as the log writes them (h-and-m's article ids without their leading zero).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from runner.common.errors import InputError
from runner.common.label_metrics import mean_average_precision
from runner.competition.spec import CompetitionSpec
from runner.data.reading import located

WEEK_DAYS = 7  # the popular items are the last week's, and the last week is what a choice is scored on
OWN_DAYS = (0, 7, 14, 28, 56, 112)  # days of a person's own past tried (0: none, the popular items alone)
HEAD_ROWS = 1000  # rows read to find the column of dates


@dataclass(frozen=True)
class Events:
    """The log as codes: who (`people`' positions), which item (`items`' positions) and the day, one row an
    event."""

    who: np.ndarray
    item: np.ndarray
    day: np.ndarray  # days since 1970-01-01
    people: pd.Index  # the people's ids as written
    items: pd.Index  # the items as written

    def before(self, day: int) -> "Events":
        keep = self.day < day
        return Events(self.who[keep], self.item[keep], self.day[keep], self.people, self.items)


def date_column(path: Path, skip: tuple[str, ...]) -> str:
    """The log's column of dates: the first whose first HEAD_ROWS values all read as dates."""
    head = pd.read_csv(path, nrows=HEAD_ROWS, dtype=str)
    for column in head.columns:
        if column in skip or head[column].isna().any():
            continue
        if pd.to_datetime(head[column], errors="coerce", format="ISO8601").notna().all():
            return column
    raise InputError(f"{path}: no column of dates (ISO, as 2020-09-22) to tell the recent items by")


def read_events(path: Path, person: str, item: str) -> Events:
    """The person, item and date columns of a log, read as dictionaries of their values (a shop's 31 M purchases
    in a few hundred MB)."""
    from pyarrow import csv

    when = date_column(path, (person, item))
    columns = [person, item, when]
    try:
        table = csv.read_csv(path, convert_options=csv.ConvertOptions(
            include_columns=columns, column_types={c: "string" for c in columns}, auto_dict_encode=True,
            auto_dict_max_cardinality=2**31 - 1))
    except Exception as exc:  # pyarrow's ArrowInvalid names the column or row at fault
        raise InputError(f"{path}: cannot read columns {columns}: {exc}") from exc
    codes = {c: table.column(c).combine_chunks().dictionary_encode() for c in columns}
    dates = pd.to_datetime(pd.Series(codes[when].dictionary.to_numpy(zero_copy_only=False)), format="ISO8601")
    days = (dates.to_numpy().astype("datetime64[D]").astype(np.int64))
    return Events(codes[person].indices.to_numpy(), codes[item].indices.to_numpy(),
                  days[codes[when].indices.to_numpy()], pd.Index(codes[person].dictionary.to_pylist()),
                  pd.Index(codes[item].dictionary.to_pylist()))


def popular(events: Events, k: int) -> np.ndarray:
    """The k items taken most in the log's last week (ties: the item first seen first)."""
    recent = events.item[events.day > events.day.max() - WEEK_DAYS]
    counts = np.bincount(recent, minlength=len(events.items))
    return np.argsort(-counts, kind="stable")[:k]


def own_items(events: Events, days: int, k: int) -> pd.Series:
    """Each person's items of their last `days` days in the log (ranked by how often, then how lately they took
    each), k at most: a list of item codes by person code."""
    if days <= 0 or not len(events.day):
        return pd.Series(dtype=object)
    keep = events.day > events.day.max() - days
    frame = pd.DataFrame({"who": events.who[keep], "item": events.item[keep], "day": events.day[keep]})
    ranked = frame.groupby(["who", "item"], sort=False).agg(times=("day", "size"), last=("day", "max")).reset_index()
    ranked = ranked.sort_values(["who", "times", "last"], ascending=[True, False, False], kind="stable")
    return ranked.groupby("who", sort=False)["item"].apply(lambda items: items.to_numpy()[:k])


def rankings(events: Events, people: np.ndarray, days: int, k: int) -> list[np.ndarray]:
    """For each person code (-1: not in the log) their own items, then the popular ones, k item codes each."""
    fill, own = popular(events, k), own_items(events, days, k)
    mine = own.to_dict()
    out = []
    for who in people:
        first = mine.get(int(who))
        if first is None:
            out.append(fill)
            continue
        out.append(np.concatenate([first, fill[~np.isin(fill, first)]])[:k])
    return out


def held_out_scores(events: Events, k: int) -> dict[int, float]:
    """MAP@k on the log's last week (from its last day less WEEK_DAYS on) of the rankings made from the days
    before it, for each length of a person's own past in OWN_DAYS."""
    start = int(events.day.max()) - WEEK_DAYS
    past = events.before(start)
    if not len(past.day):
        return {0: 0.0}
    later = pd.Series(events.item[events.day >= start]).groupby(events.who[events.day >= start]).agg(set)
    people = later.index.to_numpy()
    return {days: mean_average_precision(later.tolist(), [list(r) for r in rankings(past, people, days, k)], k)
            for days in OWN_DAYS}


def written(events: Events, ranked: list[np.ndarray]) -> list[str]:
    items = events.items.to_numpy()
    return [" ".join(items[r]) for r in ranked]


@dataclass(frozen=True)
class Ranked:
    """The ranking chosen for every person of the sample, the prior's (the popular items alone), and why."""

    chosen: list[str]
    prior: list[str]
    note: str


def recommend(spec: CompetitionSpec, data_dir: Path, sample: pd.DataFrame) -> Ranked:
    """The ranking for each person of the sample (its id column), from the log in the spec's train file (its
    `baseline_column` the items), the length of their own past chosen on the log's held-out last week."""
    if not spec.train_file or not spec.baseline_column or not spec.top_k:
        raise InputError(f"spec {spec.id}: recent_items needs train_file (the log), baseline_column (its items) "
                         "and top_k")
    path = located(Path(data_dir) / spec.train_file, "log of events", Path(data_dir))
    events = read_events(path, spec.id_column, spec.baseline_column)
    k = spec.top_k
    scores = held_out_scores(events, k)
    days = max(scores, key=lambda d: (scores[d], -d))  # the shortest past of the best score
    people = events.people.get_indexer(sample[spec.id_column].astype(str))
    chosen = written(events, rankings(events, people, days, k))
    prior = written(events, rankings(events, people, 0, k))
    said = ", ".join(f"{d} days {s:.4f}" for d, s in scores.items())
    what = f"each person's own items of their last {days} days, then" if days else "for everyone"
    note = (f"{what} the {k} items taken most in the last {WEEK_DAYS} days of {spec.train_file}; the days of a "
            f"person's own past chosen by MAP@{k} on its last week held out ({said})")
    return Ranked(chosen, prior, note)
