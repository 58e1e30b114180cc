"""Writes reader_golden_<model>.json: llama.cpp's view of a pinned GGUF reader, which the reader
crate's tests compare with.

- "tokens": token ids of test texts (no BOS, control-token texts parsed as the tokens), as
  llama.cpp tokenises them;
- "prompt": the chat template rendered by Jinja2 the way Hugging Face apply_chat_template does
  (trim_blocks, lstrip_blocks, add_generation_prompt) for the test messages;
- "greedy": the first 12 token ids llama.cpp generates greedily (argmax of the logits) from that
  prompt.

Run with a Python that has llama-cpp-python==0.3.16 and jinja2:
    python make_reader_golden.py <model.gguf> <name>
"""
import json
import sys
from pathlib import Path

import jinja2
import llama_cpp
import numpy as np

TEXTS = [
    "hello world",
    "Hello World!!  \n\n  indented\tline\r\n",
    "I moved to Lisbon in May 2023; it's 12345 km away.",
    "don't WON'T I'll",
    "日本語のテキストと emoji 🙂👍🏽",
    "café naïve Straße ÅNGSTRÖM",
    "def f(x):\n    return x**2  # square\n",
    "[#12] 10:00 user: I moved.\n[#13 #57] 10:01 assistant (Ada): Noted.",
    "<|im_start|>user\nhi<|im_end|>\n",
    "   ",
    "a\n\nb\n\n\nc",
    "3.14159 1,000,000 0x1F",
]

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
    {"role": "user", "content": "What is the capital of France?"},
]


def main():
    path, name = sys.argv[1], sys.argv[2]
    llm = llama_cpp.Llama(model_path=path, n_ctx=512, n_threads=2, logits_all=True, verbose=False)
    tokens = [
        {"text": t, "ids": llm.tokenize(t.encode(), add_bos=False, special=True)} for t in TEXTS
    ]
    template_source = llm.metadata["tokenizer.chat_template"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    prompt = env.from_string(template_source).render(
        messages=MESSAGES, add_generation_prompt=True, tools=None
    )
    ids = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    llm.eval(ids)
    greedy = []
    for _ in range(12):
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        greedy.append(token)
        llm.eval([token])
    out = {"model": name, "tokens": tokens, "messages": MESSAGES, "prompt": prompt,
           "prompt_ids": ids, "greedy": greedy,
           "greedy_text": llm.detokenize(greedy).decode("utf-8", "replace")}
    target = Path(__file__).resolve().parent / f"reader_golden_{name}.json"
    target.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
