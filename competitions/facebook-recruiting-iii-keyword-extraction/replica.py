"""A synthetic facebook-recruiting-iii-keyword-extraction: programming questions (train.csv `Id,Title,Body,Tags`,
the body HTML, the tags space-separated), MLE-bench's 90/10 random split of the real Train.csv: test.csv without
the tags, the sample the whole test table with `Tags` the same five for every row, private/test.csv the test rows
with their tags.

Each tag has its own words (the tag's name, and words that come with it: what a question about it says and the
code it shows). A question has one to five tags, drawn with the real tags' uneven shares, and its title and body
use their words among plain ones (some say nothing of a tag, words of a family of tags are shared, and a word of
another tag slips in now and then); some questions are asked twice, word for word, so a test question may have a twin
in train, as in the real set. TF-IDF with a model a tag, or a sentence encoder, finds the tags; the prior (the
commonest tags for every question) scores a micro-F1 of about 0.1.

`sizes(scale)`: questions at a factor of the replica's own count; at REAL the real 6,034,195.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders
from runner.demo._words import FILLER, paragraph, sentence

QUESTIONS = 3_000  # the replica's questions: 2,700 to train, 300 to test
REAL_QUESTIONS = 6_034_195  # the real Train.csv: 5,430,775 to MLE-bench's train and 603,420 to its test
TEST_SHARE = 0.1  # MLE-bench's split
TAGS = ("c#", "java", "php", "javascript", "android", "jquery", "c++", "python", "iphone", "asp.net", "mysql", "html",
        ".net", "ios", "objective-c", "sql", "css", "linux", "ruby-on-rails", "windows", "c", "sql-server", "ruby",
        "wpf", "xml", "ajax", "database", "regex", "windows-7", "asp.net-mvc", "xcode", "django", "osx", "arrays",
        "vb.net", "eclipse", "json", "facebook", "ruby-on-rails-3", "ubuntu", "performance", "networking", "string",
        "multithreading", "winforms", "security", "visual-studio-2010", "bash", "image", "apache", "html5", "wcf",
        "wordpress", "git", "query", "spring", "oracle", "forms", "hibernate", "algorithm", "silverlight", "excel",
        "linq", "flash", "matlab", "shell", "sql-server-2008", "perl", "file", "api")  # the real commonest, in order
TAGS_PER_QUESTION = (1, 2, 2, 3, 3, 3, 4, 4, 5)  # drawn uniformly: 3 on average, as the real questions have
CUES = 3  # words of its own each tag has, besides its name
NAME_SHARE = 0.35  # a tagged question says the tag's name this often (the title, or the body)
SILENT = 0.15  # a tag the question says nothing of
FAMILIES = 17  # tags whose index is alike modulo this share words (a family: jquery, ajax and javascript)
FAMILY_SHARE = 0.5  # a tag's question uses a word of its family this often
STRAY = 0.3  # a question mentions a word of a tag it lacks this often
TWINS = 0.06  # questions asked again, word for word, under another id
SAMPLE_TAGS = "javascript c# python php java"  # what the real sample gives every question
SYLLABLES = ("ka", "lo", "mi", "zu", "re", "ta", "vo", "ne", "shi", "pa", "gu", "de", "fy", "wo", "xi", "bra")


def sizes(scale: float | str = 1.0) -> int:
    """How many questions (train and test together) `scale` writes."""
    return scaled(QUESTIONS, REAL_QUESTIONS, parse_scale(scale), 20)


def _cue_words(rng: np.random.Generator) -> list[list[str]]:
    """Each tag's own words, then each family's: made-up terms of two or three syllables, no two alike."""
    seen: set[str] = set()
    words = []
    for _ in range(len(TAGS) + FAMILIES):
        own = []
        while len(own) < CUES:
            word = "".join(rng.choice(SYLLABLES, int(rng.integers(2, 4))))
            if word not in seen:
                seen.add(word)
                own.append(word)
        words.append(own)
    return words


def _question(tags: list[int], cues: list[list[str]], rng: np.random.Generator) -> tuple[str, str]:
    """A title and an HTML body asking about the given tags (indices of TAGS): a tag says its name or its own
    words, or a word its family shares, or nothing at all; and a word of a tag the question lacks slips in."""
    title_cues, body_cues, code = [], [], []
    for tag in tags:
        if rng.random() < SILENT:
            continue
        own = list(rng.choice(cues[tag], int(rng.integers(1, CUES + 1)), replace=False))
        if rng.random() < NAME_SHARE:
            (title_cues if rng.random() < 0.5 else body_cues).append(TAGS[tag])
        if rng.random() < FAMILY_SHARE:
            own.append(cues[len(TAGS) + tag % FAMILIES][int(rng.integers(0, CUES))])
        (title_cues if rng.random() < 0.5 else body_cues).append(own[0])
        body_cues.extend(own[1:])
        code.append(f"{own[-1]}.{rng.choice(cues[tag])}({int(rng.integers(0, 99))});")
    if rng.random() < STRAY:
        body_cues.append(str(rng.choice(cues[int(rng.integers(0, len(TAGS)))])))
    title = sentence(rng, title_cues, length=(3, 8), end="?")
    body = f"<p>{paragraph(rng, body_cues, sentences=(1, 4))}</p>\n\n<pre><code>{' '.join(code)}\n</code></pre>\n"
    return title, body


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = folders(root)
    total = sizes(scale)
    cues = _cue_words(rng)
    weights = np.arange(1, len(TAGS) + 1) ** -1.0
    asked = total - round(TWINS * total)
    rows = []
    for _ in range(asked):
        tags = rng.choice(len(TAGS), int(rng.choice(TAGS_PER_QUESTION)), replace=False, p=weights / weights.sum())
        rows.append((*_question(list(tags), cues, rng), " ".join(TAGS[t] for t in tags)))
    rows += [rows[int(k)] for k in rng.integers(0, asked, total - asked)]  # asked again, word for word
    frame = pd.DataFrame(rows, columns=["Title", "Body", "Tags"])
    frame.insert(0, "Id", rng.permutation(total) + 1)
    frame = frame.sort_values("Id").reset_index(drop=True)  # the raw file's order, by Id
    shuffled = rng.permutation(total)  # the split shuffles both parts
    test_rows = shuffled[: round(TEST_SHARE * total)]
    train, test = frame.iloc[shuffled[len(test_rows):]], frame.iloc[test_rows]
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns="Tags").to_csv(public / "test.csv", index=False)
    test.assign(Tags=SAMPLE_TAGS).to_csv(public / "sample_submission.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    describe(public, "Facebook Recruiting III - Keyword Extraction",
             "Predict the tags (keywords) of each question in test.csv from its Title and Body: space-separated.",
             "Submissions are evaluated on the mean F1 score (micro-averaged over every question and tag).",
             "Submit `Id,Tags` for every test question (other columns are ignored).")
