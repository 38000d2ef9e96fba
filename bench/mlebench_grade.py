"""Grades submissions with MLE-bench's own graders: run by a Python that has `mlebench` installed (never the
project's: the runner does not depend on MLE-bench), e.g. the one `make mlebench-venv` makes from a clone of
openai/mle-bench.

    python mlebench_grade.py MLEBENCH_COMPETITIONS_DIR < requests.jsonl > grades.jsonl

Each request line is {"competition", "submission", "private"}: the competition's id, a submission file and the
replica's prepared/private folder, where the answers file MLE-bench's config names is read. Each answer line adds
"score" (None where MLE-bench calls the submission invalid: its grader raised) and "error".
"""
import contextlib
import json
import logging
import sys
import warnings
from pathlib import Path

import yaml


def grade(request: dict, competitions: Path) -> dict:
    from mlebench.grade_helpers import Grader
    from mlebench.utils import load_answers, read_csv

    config = yaml.safe_load((competitions / request["competition"] / "config.yaml").read_text())
    answers_file = Path(request["private"]) / Path(config["dataset"]["answers"]).name
    try:
        answers = load_answers(answers_file)
        submission = read_csv(Path(request["submission"]))
        score = Grader.from_dict(config["grader"]).grade_fn(submission, answers)
        return {**request, "score": round(float(score), 5), "error": None}
    except Exception as exc:  # MLE-bench's grading calls any exception an invalid submission (score None)
        return {**request, "score": None, "error": f"{type(exc).__name__}: {exc}"[:300]}


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.CRITICAL)
    competitions = Path(sys.argv[1])
    answers = sys.stdout
    for line in sys.stdin:
        if line.strip():
            with contextlib.redirect_stdout(sys.stderr):  # some graders print (pycocotools' tables): not answers
                answer = grade(json.loads(line), competitions)
            print(json.dumps(answer), file=answers, flush=True)


if __name__ == "__main__":
    main()
