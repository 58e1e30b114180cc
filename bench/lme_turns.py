#!/usr/bin/env python3
"""Turns for bench/compile-under-appends, from LongMemEval S (the evaluation's copy).

Writes into OUT_DIR: base.jsonl (TURNS turns of namespace NS, cycling the first DISTINCT
distinct turn texts of the haystacks, fifty to a session), texts.jsonl (the distinct texts after
those, one JSON string a line: what the load appends) and questions.jsonl (the questions).

Usage: lme_turns.py DATASET_JSON_GZ OUT_DIR [--namespace NS] [--turns N] [--distinct D]
"""
import argparse
import gzip
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("dataset")
parser.add_argument("out_dir")
parser.add_argument("--namespace", default="big")
parser.add_argument("--turns", type=int, default=100_000)
parser.add_argument("--distinct", type=int, default=100_000)
args = parser.parse_args()

with gzip.open(args.dataset) as f:
    questions = json.load(f)
seen, distinct = set(), []
for q in questions:
    for session in q["haystack_sessions"]:
        for turn in session:
            text = turn["content"]
            if text.strip() and text not in seen:
                seen.add(text)
                distinct.append((turn["role"], text))
base, rest = distinct[: args.distinct], distinct[args.distinct :]
if len(base) < args.distinct or not rest:
    raise SystemExit(f"{args.dataset}: {len(distinct)} distinct texts, too few for --distinct {args.distinct}")

os.makedirs(args.out_dir, exist_ok=True)
with open(os.path.join(args.out_dir, "base.jsonl"), "w") as out:
    for k in range(args.turns):
        role, text = base[k % len(base)]
        day, second = 1 + k // 4000 % 28, k % 86_400
        time = f"2023-05-{day:02d}T{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}Z"
        turn = {"namespace": args.namespace, "session": f"base-{k // 50}", "turn": k % 50,
                "role": role, "text": text, "time": time}
        out.write(json.dumps(turn) + "\n")
with open(os.path.join(args.out_dir, "texts.jsonl"), "w") as out:
    for _, text in rest:
        out.write(json.dumps(text) + "\n")
with open(os.path.join(args.out_dir, "questions.jsonl"), "w") as out:
    for q in questions:
        out.write(json.dumps(q["question"]) + "\n")
print(f"{args.turns} base turns over {len(base)} distinct texts, {len(rest)} texts to append")
