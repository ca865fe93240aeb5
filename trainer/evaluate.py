"""Exact-match accuracy of a chat model on the generated tasks' held-out questions (never seen in training).

Each question is put in the ChatML turn the model was trained on, the engine answers greedily until <|im_end|>
(at most 32 tokens), and the answer counts only if it equals the expected text exactly (surrounding whitespace
stripped).
"""
import argparse
import json
import sys

import petit
from trainer.chat_corpus import EOS_TOKEN, tasks


def prompt_for(question: str) -> str:
    return f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"


def answer(model, question: str, max_tokens: int = 32) -> str:
    tok = model.tokenizer
    ids = tok.encode(prompt_for(question))
    stop = [tok.token_to_id(EOS_TOKEN)]
    steps = petit.stream_text(model, ids, max_tokens=max_tokens, stop_ids=stop)
    return "".join(s.text for s in steps).strip()


def evaluate(model_path, weights=None) -> dict:
    """{task: {"correct": int, "total": int, "accuracy": float, "examples": [(q, expected, got), ...3 misses]}}"""
    model = petit.load(model_path, weights=weights)
    result = {}
    for task, pairs in tasks().items():
        misses, correct = [], 0
        for q, expected in pairs:
            got = answer(model, q)
            if got == expected:
                correct += 1
            elif len(misses) < 3:
                misses.append((q, expected, got))
        result[task] = {"correct": correct, "total": len(pairs), "accuracy": correct / len(pairs),
                        "misses": misses}
    model.close()
    return result


def table(results: dict[str, dict]) -> str:
    """A markdown table: one row per task, one column per model label."""
    labels = list(results)
    task_names = list(next(iter(results.values())))
    lines = ["| task | held-out questions | " + " | ".join(labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for t in task_names:
        total = results[labels[0]][t]["total"]
        scores = " | ".join(f"{100 * results[l][t]['accuracy']:.0f} %" for l in labels)
        lines.append(f"| {t} | {total} | {scores} |")
    overall = {l: sum(r["correct"] for r in results[l].values()) / sum(r["total"] for r in results[l].values())
               for l in labels}
    n = sum(r["total"] for r in results[labels[0]].values())
    lines.append(f"| **all** | {n} | " + " | ".join(f"**{100 * overall[l]:.0f} %**" for l in labels) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", help="LABEL=MODEL.petit pairs")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    results = {}
    for item in args.models:
        label, _, path = item.rpartition("=")
        results[label or path] = evaluate(path)
    print(table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
