#!/usr/bin/env python3
"""PyTorch + sentence-transformers anchor for `evicortex-bench embed`.

Reads a JSON request {"model_dir", "max_seq_length", "threads", "texts", "configs": [{"name",
"batch_size", "order"}]} on stdin, embeds the texts with sentence-transformers on the CPU for every
configuration, and writes one JSON line per configuration to stdout with wall and CPU seconds and
the peak resident set during it (reset through /proc/self/clear_refs, as the Rust side does). The
model directory is the verified cache directory (the Rust side verified it before calling).
`order` is the order of the texts (sorted by token count or not); batches are formed here, one
`encode` call per batch, so each configuration measures the batch composition asked for
(sentence-transformers would otherwise sort a whole call by length itself).
"""
import json
import sys
import time


def reset_peak_rss():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("/proc/self/status has no VmHWM line")


def main():
    request = json.load(sys.stdin)
    import torch
    from sentence_transformers import SentenceTransformer

    threads = request.get("threads")
    if threads:
        torch.set_num_threads(int(threads))
    model = SentenceTransformer(request["model_dir"], device="cpu")
    model.max_seq_length = int(request["max_seq_length"])
    texts = request["texts"]
    print(json.dumps({"event": "ready", "torch": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    with torch.inference_mode():
        model.encode(texts[:8], batch_size=8)
        for config in request["configs"]:
            order = [texts[i] for i in config["order"]]
            batch = config["batch_size"]
            reset_peak_rss()
            wall0, cpu0 = time.perf_counter(), time.process_time()
            for start in range(0, len(order), batch):
                model.encode(order[start:start + batch], batch_size=batch, convert_to_numpy=True)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            print(json.dumps({"event": "config", "name": config["name"], "wall_s": wall, "cpu_s": cpu, "peak_rss_mib": peak_rss_mib()}), flush=True)


if __name__ == "__main__":
    main()
