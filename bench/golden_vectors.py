#!/usr/bin/env python3
"""Writes the golden vectors the Rust parity test compares against.

The reference is PyTorch + sentence-transformers loading the *verified* model directory that
`evicortex model fetch` installed (every file is re-checked here against the committed manifest
before anything is loaded). Run it with the bench venv (bench/setup_venv.sh):

    $VENV/bin/python bench/golden_vectors.py --model-dir "$(evicortex model path)" \
        --manifest crates/embed/manifests/all-minilm-l6-v2.json \
        --out crates/embed/tests/golden/all-minilm-l6-v2.json
    $VENV/bin/python bench/golden_vectors.py \
        --model-dir "$(evicortex model path all-mpnet-base-v2)" \
        --manifest crates/embed/manifests/all-mpnet-base-v2.json \
        --out crates/embed/tests/golden/all-mpnet-base-v2.json

The maximum length is the model's own (sentence_bert_config.json: 256 for MiniLM, 384 for
MPNet). For MPNet the file also records the relative-position bucket of every offset, as the
reference computes it, so that the Rust bucketing is checked on every boundary.
"""
import argparse
import hashlib
import json
import os
import sys


def verify(model_dir, manifest_path):
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    found = set()
    for root, dirs, files in os.walk(model_dir):
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                sys.exit(f"refusing symlink {path}")
            found.add(os.path.relpath(path, model_dir).replace(os.sep, "/"))
    listed = {entry["path"]: entry["sha256"] for entry in manifest["files"]}
    if found != set(listed):
        sys.exit(f"model directory files differ from the manifest: {sorted(found ^ set(listed))}")
    for rel, digest in listed.items():
        with open(os.path.join(model_dir, rel), "rb") as f:
            actual = hashlib.sha256(f.read()).hexdigest()
        if actual != digest:
            sys.exit(f"{rel}: sha256 {actual} does not match the pinned {digest}")
    return manifest


LOREM = (
    "Last spring I moved from Porto to Lisbon for a new job at a small robotics company, and the first "
    "few weeks were chaotic: the flat near Alfama had no working oven, my bike was stolen twice, and I "
    "kept confusing the tram lines. My sister visited in June and we spent a weekend in Sintra, where it "
    "rained the whole time, but the palace gardens were still beautiful. At work I maintain the motion "
    "planning stack, mostly C++ with some Python tooling, and I have been trying to convince the team to "
    "adopt property-based tests for the trajectory optimiser. In the evenings I take Portuguese lessons "
    "twice a week, play five-a-side football on Thursdays, and I recently started learning to cook "
    "bacalhau properly, which turns out to require soaking the cod for two days. "
)


def fit_tokens(tokenizer, text, target):
    """Longest word prefix of `text` whose length with special tokens is <= target."""
    words = text.split(" ")
    lo, hi = 1, len(words)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        n = len(tokenizer(" ".join(words[:mid]))["input_ids"])
        if n <= target:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    # Pad with one-token words to hit the target exactly.
    while len(tokenizer(text)["input_ids"]) < target:
        text += " a"
    return text


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    manifest = verify(args.model_dir, args.manifest)

    import torch
    import sentence_transformers
    import transformers
    from sentence_transformers import SentenceTransformer, models

    torch.manual_seed(0)
    mean_model = SentenceTransformer(args.model_dir, device="cpu")
    max_tokens = mean_model.max_seq_length
    assert max_tokens in (256, 384), max_tokens
    dimension = mean_model.get_sentence_embedding_dimension()
    transformer = models.Transformer(args.model_dir, max_seq_length=max_tokens)
    cls_model = SentenceTransformer(
        modules=[transformer, models.Pooling(dimension, pooling_mode="cls"), models.Normalize()], device="cpu"
    )
    tokenizer = mean_model.tokenizer

    long_text = LOREM * 4
    cases = [
        ("short", "I moved to Lisbon in May."),
        ("question", "Where did I move to last spring?"),
        ("single_word", "hello"),
        ("empty", ""),
        ("whitespace", "   \t  "),
        ("mixed_case_punct", "WAIT... did you say the meeting is at 3:45 PM?! That's NOT what the memo said!!!"),
        ("numbers_dates", "On 2023/05/30 (Tue) 21:56 I paid $1,299.99 for 3 tickets to flight LH-1172."),
        ("accents", "Café crème, naïve façade, São Paulo, Zürich, déjà vu, Ångström, smørrebrød."),
        ("cjk", "我昨天在东京吃了拉面，然后去了秋叶原。今日はとても暑いですね。서울에서 만나요."),
        ("cyrillic_arabic", "Привет, как дела? مرحبا، كيف حالك؟ Γειά σου κόσμε."),
        ("emoji", "Had the best day ever 🎉🎂🥳 at the beach 🏖️ with my dog 🐕‍🦺 — 10/10 would repeat 👍🏽"),
        ("code", "fn main() { let v: Vec<u32> = (0..10).map(|x| x * x).collect(); println!(\"{:?}\", v); }"),
        ("python_code", "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])"),
        ("url_email", "Send the report to jane.doe+memo@example.com or upload it at https://example.org/upload?id=42&x=y"),
        ("medium", LOREM[:600]),
        (f"near_max_{max_tokens - 1}", fit_tokens(tokenizer, long_text, max_tokens - 1)),
        (f"exactly_max_{max_tokens}", fit_tokens(tokenizer, long_text, max_tokens)),
        ("repeated_chars", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbb"),
        ("control_and_newlines", "line one\nline two\r\n\ttabbed\u00a0nbsp\u200bzero-width"),
    ]
    truncated_cases = [
        ("over_max_truncate", long_text),
        ("over_max_unicode_truncate", ("Café 東京 🎉 " * 120).strip()),
    ]
    cls_cases = ["short", "cjk", "code", f"exactly_max_{max_tokens}"]

    def token_count(text):
        return len(tokenizer(text, truncation=False)["input_ids"])

    texts = [text for _, text in cases] + [text for _, text in truncated_cases]
    with torch.no_grad():
        mean_vectors = mean_model.encode(texts, batch_size=8, convert_to_numpy=True, normalize_embeddings=False)
        cls_texts = [dict(cases)[name] for name in cls_cases]
        cls_vectors = cls_model.encode(cls_texts, batch_size=8, convert_to_numpy=True)

    out_cases = []
    for i, (name, text) in enumerate(cases + truncated_cases):
        n = token_count(text)
        overlength = "truncate" if n > max_tokens else "fits"
        if (name, text) in truncated_cases:
            assert n > max_tokens, (name, n)
        else:
            assert n <= max_tokens, (name, n)
        out_cases.append({
            "name": name, "text": text, "token_count": n, "overlength": overlength, "pooling": "mean",
            "vector": [float(x) for x in mean_vectors[i]],
        })
    for name, vector in zip(cls_cases, cls_vectors):
        text = dict(cases)[name]
        out_cases.append({
            "name": f"{name}_cls", "text": text, "token_count": token_count(text), "overlength": "fits",
            "pooling": "cls", "vector": [float(x) for x in vector],
        })

    golden = {
        "model": manifest["name"],
        "revision": manifest["revision"],
        "directory_sha256": manifest["directory_sha256"],
        "max_tokens": max_tokens,
        "normalization": "l2",
        "generator": {
            "script": "bench/golden_vectors.py",
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
        },
        "cases": out_cases,
    }
    encoder = getattr(mean_model[0].auto_model, "encoder", None)
    if hasattr(encoder, "relative_position_bucket"):
        offsets = torch.arange(-511, 512)
        golden["relative_buckets"] = {
            "num_buckets": mean_model[0].auto_model.config.relative_attention_num_buckets,
            "first_offset": -511,
            "buckets": [int(b) for b in encoder.relative_position_bucket(offsets)],
        }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(out_cases)} golden vectors to {args.out}")


if __name__ == "__main__":
    main()
