"""Whether a change made the runner worse on the quality bench: two results files of bench/quality.py, row by row.

For each data set and budget in both, the runner's score before and after, and its edge over the simple
baseline after (LightGBM defaults for tables, TF-IDF + logistic regression for texts: the same deterministic
contestant in both runs, graded on the same test rows) with that edge's 90% interval over paired resamples of
those rows. The runner's score moved by (after - before), which is also how far
its edge over that contestant moved; a row is worse beyond noise when the edge fell by more than the interval's
half-width, i.e. by more than the test rows' noise on a difference of two such submissions.

    python compare_quality.py results/quality.json results/quality-after.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from _common import save


def rows_of(path: Path) -> dict[tuple[str, int], dict]:
    return {(r["dataset"], r["budget"]): r for r in json.loads(Path(path).read_text())["rows"]}


def compare(before: dict, after: dict) -> dict:
    """One row's verdict (see the module's docstring)."""
    sign = -1 if after["lower_is_better"] else 1
    simple = "lightgbm_defaults" if "lightgbm_defaults" in after else "tfidf_logistic"
    edge = after[simple]["runner_edge"]
    moved = sign * (after["runner"]["score"] - before["runner"]["score"])  # positive: better after
    noise = (edge["high"] - edge["low"]) / 2
    return dict(dataset=after["dataset"], budget=after["budget"], metric=after["metric"],
                before=before["runner"]["score"], after=after["runner"]["score"], moved=round(moved, 5),
                noise=round(noise, 5), worse_beyond_noise=moved < -noise,
                commits=f"{before.get('commit')} -> {after.get('commit')}")


def main(argv: list[str]) -> int:
    before, after = rows_of(Path(argv[0])), rows_of(Path(argv[1]))
    rows = [compare(before[key], after[key]) for key in sorted(after) if key in before]
    for r in rows:
        print(f"{r['dataset']:12s} {r['budget']:4d} s  {r['metric']:9s} {r['before']:.5f} -> {r['after']:.5f}  "
              f"moved {r['moved']:+.5f} (noise +-{r['noise']:.5f}){'  WORSE' if r['worse_beyond_noise'] else ''}")
    worse = [r for r in rows if r["worse_beyond_noise"]]
    print(f"{len(rows)} rows compared, {len(worse)} worse beyond noise")
    save("quality_compare", rows, worse_beyond_noise=[f"{r['dataset']} {r['budget']} s" for r in worse])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
