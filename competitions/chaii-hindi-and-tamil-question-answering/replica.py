"""A synthetic chaii-hindi-and-tamil-question-answering: Wikipedia-like passages in Hindi and Tamil, a question on
each and its answer, a span of the passage, as MLE-bench lays the competition out (its 90/10 split of the real
train.csv): train.csv `id,context,question,answer_text,answer_start,language`, test.csv without the answer, the
answers in private/test.csv (`id,PredictionString`), and a sample whose every answer is `dummy text`.

A passage is sentences of common words of its language; one sentence holds the fact asked for: a cue word the
question also names, followed by the answer (a year, or a name of one or two words). `answer_start` is the
answer's first character in the passage. The whole passage as the answer scores a word Jaccard near 0 (its
hundred words against the answer's one or two); the sample scores 0.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from runner.demo._layout import describe, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids
from runner.demo._words import pick

TRAIN_ROWS, TEST_ROWS = 200, 60
REAL_TRAIN, REAL_TEST = 1_002, 112  # MLE-bench's 90/10 split of the 1,114 questions
MIN_ROWS = 20
HINDI_SHARE = 0.67  # the real mix: two Hindi questions for each Tamil one
WORDS = {
    "hindi": ("और", "का", "की", "के", "में", "है", "यह", "वह", "से", "को", "पर", "भारत", "नदी", "शहर", "वर्ष",
              "सरकार", "लोग", "देश", "समय", "पहले", "बाद", "नाम", "राज्य", "इतिहास", "भाषा", "गाँव", "मंदिर"),
    "tamil": ("மற்றும்", "இது", "அது", "ஒரு", "இந்த", "நகரம்", "ஆண்டு", "அரசு", "மக்கள்", "நாடு", "பெயர்",
              "இந்தியா", "ஆறு", "கோயில்", "மொழி", "வரலாறு", "கிராமம்", "காலம்", "முதல்", "பின்னர்", "மாநிலம்"),
}
CUES = {  # cue word of the passage, the question's wording, the kind of answer
    "hindi": (("जन्म", "का जन्म कब हुआ", "year"), ("राजधानी", "की राजधानी क्या है", "name"),
              ("स्थापना", "की स्थापना कब हुई", "year"), ("लेखक", "के लेखक कौन हैं", "name")),
    "tamil": (("பிறந்தார்", "எப்போது பிறந்தார்", "year"), ("தலைநகரம்", "தலைநகரம் எது", "name"),
              ("நிறுவப்பட்டது", "எப்போது நிறுவப்பட்டது", "year"), ("எழுதியவர்", "எழுதியவர் யார்", "name")),
}
NAMES = {"hindi": ("दिल्ली", "पटना", "लखनऊ", "प्रेमचंद", "तुलसीदास", "जयपुर", "कबीर दास", "महादेवी वर्मा"),
         "tamil": ("சென்னை", "மதுரை", "பாரதியார்", "கம்பர்", "திருவள்ளுவர்", "கோவை", "கல்கி", "சேலம்")}
SENTENCES = (6, 14)  # a passage's sentences
DANDA = {"hindi": "।", "tamil": "."}  # a sentence's end


def _sentence(language: str, rng: np.random.Generator, middle: list[str] | None = None) -> str:
    words = pick(rng, WORDS[language], int(rng.integers(5, 12)))
    if middle:
        at = int(rng.integers(1, len(words)))
        words = words[:at] + middle + words[at:]
    return " ".join(words) + " " + DANDA[language]


def _question(language: str, rng: np.random.Generator) -> dict:
    cue, asked, kind = CUES[language][int(rng.integers(len(CUES[language])))]
    answer = str(int(rng.integers(1200, 2020))) if kind == "year" else \
        NAMES[language][int(rng.integers(len(NAMES[language])))]
    subject = WORDS[language][int(rng.integers(11, len(WORDS[language])))]
    sentences = [_sentence(language, rng) for _ in range(int(rng.integers(*SENTENCES)))]
    at = int(rng.integers(len(sentences)))
    sentences[at] = _sentence(language, rng, [subject, cue, answer])
    context = " ".join(sentences)
    start = context.index(f"{cue} {answer}") + len(cue) + 1
    return {"context": context, "question": f"{subject} {asked}?", "answer_text": answer, "answer_start": start,
            "language": language}


def counts(scale: float | str = 1.0) -> tuple[int, int]:
    scale = parse_scale(scale)
    return scaled(TRAIN_ROWS, REAL_TRAIN, scale, MIN_ROWS), scaled(TEST_ROWS, REAL_TEST, scale, MIN_ROWS)


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (train.csv, test.csv, sample_submission.csv) and prepared/private/test.csv."""
    public, private = folders(root)
    train_rows, test_rows = counts(scale)
    n = train_rows + test_rows
    languages = np.where(rng.random(n) < HINDI_SHARE, "hindi", "tamil")
    frame = pd.DataFrame([_question(str(language), rng) for language in languages])
    frame.insert(0, "id", hex_ids(rng, n, 9))
    train, answers = frame.iloc[:train_rows], frame.iloc[train_rows:].reset_index(drop=True)
    train.to_csv(public / "train.csv", index=False)
    answers.drop(columns=["answer_text", "answer_start"]).to_csv(public / "test.csv", index=False)
    answers[["id", "answer_text"]].rename(columns={"answer_text": "PredictionString"}).to_csv(
        private / "test.csv", index=False)
    answers[["id"]].assign(PredictionString="dummy text").to_csv(public / "sample_submission.csv", index=False)
    describe(public, "chaii - Hindi and Tamil Question Answering",
             "Answer, for each Hindi or Tamil question in test.csv, with the span of its context that answers it.",
             "Submissions are evaluated on the word-level Jaccard score, averaged over the questions.",
             "Submit `id,PredictionString` for every test question.")
