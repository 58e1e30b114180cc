#!/usr/bin/env python3
"""Writes a small BERT cross-encoder with random weights, and its PyTorch scores, for the Rust
cross-encoder's exactness test (crates/embed/tests/it/cross_encoder.rs runs it with the bench
venv made by bench/setup_venv.sh; nothing it writes is committed).

The model is `BertForSequenceClassification` with one label, the format of the MS MARCO
cross-encoders, saved by transformers as safetensors with a fast WordPiece tokenizer. The
reference scores are the raw logits of transformers on the CPU in f32 for the pairs in
PAIRS, tokenised as one pair each (`[CLS] query [SEP] passage [SEP]`); pairs longer than the
maximum are cut in the passage only (`truncation="only_second"`).

    $VENV/bin/python bench/tiny_cross_encoder.py --out-dir DIR --reference FILE
"""
import argparse
import json
import os

MAX_TOKENS = 64

WORDS = (
    "where did i move in may last spring lisbon porto job robotics company my sister visited "
    "sintra rain palace gardens what is the name of dog cat beach football thursday cook "
    "cod soak two days tram line bike stolen oven flat near alfama work planning stack "
    "python tests team lessons evening weekend june week first few chaotic to from for a an "
    "and at on with was were had have it that this who when how why which"
).split()

PAIRS = [
    ("where did i move", "i moved to lisbon in may"),
    ("where did i move", "my sister visited sintra in june"),
    ("what is the name of my dog", "the dog was at the beach"),
    ("who cooks cod", ""),
    ("", "a passage with an empty query"),
    ("Café crème?", "Zürich, naïve façade, 東京 🎉"),
    ("what happened at work", " ".join(["robotics planning stack python tests team"] * 12)),
    ("when", "first"),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    import torch
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    torch.manual_seed(args.seed)
    os.makedirs(args.out_dir, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    candidates = sorted(set(WORDS)) + [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"]
    candidates += list("abcdefghijklmnopqrstuvwxyz0123456789.,?!'")
    vocab += [token for i, token in enumerate(candidates) if token not in candidates[:i]]
    vocab_file = os.path.join(args.out_dir, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=vocab_file, do_lower_case=True)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=MAX_TOKENS,
        type_vocab_size=2,
        num_labels=1,
        hidden_act="gelu",
        architectures=["BertForSequenceClassification"],
    )
    model = BertForSequenceClassification(config).eval()
    # Random weights at the default scale give logits near zero; widen them so the scores
    # differ and a wrong pooler, token type or position shows.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "LayerNorm" not in name:
                param.normal_(0.0, 0.2)
    model.save_pretrained(args.out_dir, safe_serialization=True)
    tokenizer.save_pretrained(args.out_dir)

    queries = [q for q, _ in PAIRS]
    passages = [p for _, p in PAIRS]
    # Counted as a batch of pairs, as scored: a single call would take an empty passage for no
    # passage at all and drop its [SEP].
    untruncated = [len(ids) for ids in tokenizer(queries, passages)["input_ids"]]
    inputs = tokenizer(
        queries, passages, padding=True, truncation="only_second", max_length=MAX_TOKENS,
        return_tensors="pt",
    )
    with torch.no_grad():
        logits = model(**inputs).logits[:, 0]
    reference = {
        "generator": {
            "script": "bench/tiny_cross_encoder.py",
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "seed": args.seed,
        },
        "max_tokens": MAX_TOKENS,
        "pairs": [
            {"query": q, "passage": p, "tokens": n, "logit": float(s)}
            for (q, p), n, s in zip(PAIRS, untruncated, logits)
        ],
    }
    with open(args.reference, "w", encoding="utf-8") as f:
        json.dump(reference, f, ensure_ascii=False, indent=1)
    print(f"wrote a {config.num_hidden_layers}-layer cross-encoder to {args.out_dir}")


if __name__ == "__main__":
    main()
