"""Rebuild the bundled default chat model from scratch, in one command:

    python -m trainer.default_model            # ~25-35 minutes on 2 cores

Generates the chat corpus (seeded), trains the BPE tokenizer and the model with the recipe below, exports
assets/default-q8_0.petit and assets/default-q4_0.petit (and an fp32 copy under build/ for comparison), verifies
both against the independent reference, and measures exact-match accuracy on the held-out questions, printing the
table that the README shows (also written to assets/default-model-eval.json).
"""
import argparse
import json
import os
import sys

# The recipe. Changing any of these changes the model; the seed makes a run reproducible bit for bit.
TRAIN_ARGS = ["--chat-corpus", "--chat-examples", "60000", "--steps", "5000", "--seed", "1337",
              "--tokenizer", "bpe", "--vocab-size", "512", "--layers", "4", "--dim", "128", "--heads", "4",
              "--kv-heads", "2", "--ffn", "384", "--context", "128", "--batch", "16", "--lr", "0.003",
              "--checkpoint-interval", "1000"]
ASSETS = "assets"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Rebuild the bundled default model.")
    p.add_argument("--checkpoint", default="build/default-ckpt",
                   help="checkpoint directory (trained here unless --skip-training)")
    p.add_argument("--skip-training", action="store_true", help="reuse an existing checkpoint")
    args = p.parse_args(argv)

    from trainer.cli import main as train_main
    from trainer.evaluate import evaluate, table
    from trainer.export import export_checkpoint
    from trainer.verify import verify

    if not args.skip_training:
        rc = train_main(["train", *TRAIN_ARGS, "-o", args.checkpoint])
        if rc != 0:
            print(f"training failed (exit {rc})", file=sys.stderr)
            return rc
    os.makedirs(ASSETS, exist_ok=True)
    os.makedirs("build", exist_ok=True)
    outputs = {"fp32": "build/default-f32.petit", "q8_0": f"{ASSETS}/default-q8_0.petit",
               "q4_0": f"{ASSETS}/default-q4_0.petit"}
    for weights, path in outputs.items():
        summary = export_checkpoint(args.checkpoint, path, weights="f32" if weights == "fp32" else weights)
        print(f"exported {path}: {summary['bytes']:,} bytes ({100 * summary['ratio']:.1f} % of fp32)")
    failed = False
    for weights in ("q8_0", "q4_0"):
        r = verify(outputs[weights])
        print(f"verify {outputs[weights]}: {'PASS' if r['pass'] else 'FAIL'} "
              f"(worst |error| {r['max_abs_err']:.3g}, argmax agreement {100 * r['argmax_agreement']:.1f} %)")
        failed |= not r["pass"]
    results = {label: evaluate(path) for label, path in outputs.items()}
    print(table(results))
    with open(f"{ASSETS}/default-model-eval.json", "w") as f:
        json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
