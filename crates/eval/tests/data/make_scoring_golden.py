"""Writes the scoring goldens the reader crate's tests compare with. Nothing of the data set is
written: the tests rebuild the same words and pairs from the LoCoMo dev file.

porter_nltk_golden.tsv: word <TAB> NLTK 3.9.1 PorterStemmer().stem(word) for words that
exercise each rule of the algorithm (the list below).

locomo_dev_stems.txt: NLTK's stem of each distinct token of the LoCoMo dev answers and
questions (normalised as LoCoMo's scorer does), one per line, in the sorted order of the tokens.

locomo_dev_f1.txt: for each dev question in file order and each of four predictions (the answer
itself; "It was " + answer.upper() + " I think"; the answer's first half of words; the
question), the score LoCoMo's released scorer (task_eval/evaluation.py in snap-research/LoCoMo,
eval_question_answering) gives it, recomputed here with NLTK's stemmer and the `regex` module.
Adversarial questions (category 5) get two predictions: "Not mentioned in the conversation."
and their adversarial answer.

Run from the repository root with a Python that has nltk==3.9.1 and regex installed:
    python crates/eval/tests/data/make_scoring_golden.py ../shared/data/locomo/locomo10.dev.json
"""
import collections
import json
import string
import sys
from pathlib import Path

import regex
from nltk.stem import PorterStemmer

OUT = Path(__file__).resolve().parent
STEMMER = PorterStemmer()


def normalise(text):
    # Commas dropped, lowercased, punctuation removed, a/an/the/and blanked, spaces collapsed.
    text = text.replace(",", "").lower()
    text = "".join(c for c in text if c not in set(string.punctuation))
    text = regex.sub(r"\b(a|an|the|and)\b", " ", text)
    return " ".join(text.split())


def token_f1(prediction, truth):
    p = [STEMMER.stem(w) for w in normalise(prediction).split()]
    t = [STEMMER.stem(w) for w in normalise(truth).split()]
    same = sum((collections.Counter(p) & collections.Counter(t)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def multi_f1(prediction, truth):
    preds = [x.strip() for x in prediction.split(",")]
    truths = [x.strip() for x in truth.split(",")]
    return sum(max(token_f1(p, t) for p in preds) for t in truths) / len(truths)


def score(category, prediction, answer):
    if category == 1:
        return multi_f1(prediction, answer)
    if category == 3:
        answer = answer.split(";")[0].strip()
    if category in (2, 3, 4):
        return token_f1(prediction, answer)
    lowered = prediction.lower()
    return 1.0 if "no information available" in lowered or "not mentioned" in lowered else 0.0


def predictions(qa):
    if qa["category"] == 5:
        return ["Not mentioned in the conversation.", str(qa["adversarial_answer"])]
    answer = str(qa["answer"])
    words = answer.split()
    return [answer, "It was " + answer.upper() + " I think",
            " ".join(words[: max(1, len(words) // 2)]), qa["question"]]


RULE_WORDS = """caresses ponies ties caress cats feed agreed disabled matting mating meeting milling
messing meetings happy sky skies dying lying tying news innings inning outings outing cannings
canning howe proceed exceed succeed relational conditional rational valenci hesitanci digitizer
conformabli radicalli differentli vileli analogousli vietnamization predication operator
feudalism decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate
formative formalize electriciti electrical hopeful goodness revival allowance inference airliner
gyroscopic adjustable defensible irritant replacement adjustment dependent adoption homologou
communism activate angulariti homologous effective bowdlerize probate rate cease controll roll
generalizations oscillators fully fulli tionally logi geology theology archaeology spied died
flies dies tried cried enjoy enjoyment toy syzygy are eve ice ore use ski yes y by trouble oats
trees ivy troubles private oaten orrery hopping hoping filing falling fizzing hissing failing
conflated troubled sized motoring singing sing plastered bled at is as I a an the running ran
Running SKIES Dying naïve café 2023 1st x86 oed ied ies eed
""".split()


def main():
    data = json.loads(Path(sys.argv[1]).read_text())
    words, scores = set(), []
    for conversation in data:
        for qa in conversation["qa"]:
            answer = str(qa["adversarial_answer"] if qa["category"] == 5 else qa["answer"])
            words.update(normalise(answer).split())
            words.update(normalise(qa["question"]).split())
            for prediction in predictions(qa):
                scores.append(score(qa["category"], prediction, answer))
    with open(OUT / "porter_nltk_golden.tsv", "w") as f:
        for word in RULE_WORDS:
            f.write(f"{word}\t{STEMMER.stem(word)}\n")
    with open(OUT / "locomo_dev_stems.txt", "w") as f:
        for word in sorted(words):
            f.write(STEMMER.stem(word) + "\n")
    with open(OUT / "locomo_dev_f1.txt", "w") as f:
        for value in scores:
            f.write(f"{value!r}\n")


if __name__ == "__main__":
    main()
