"""Running the verifier (trainer.verify.verify) for the Verify tab. verify() reports, besides the worst and mean
errors, `position_errors`: per position, the largest |engine - reference| over the vocabulary divided by the logit
scale (the quantity it holds to THRESHOLDS[weights]["max_rel_err"]), which the tab plots.

The verifier generates its tokens greedily past the model's end-of-turn token (the logits there are compared too),
but what follows that token is not the model's answer: `answer` is the generated text up to it and `end_marker`
the marker that ended it (None when the model did not end its turn)."""
from petit.generation.session import END_OF_TURN


def run(model_path: str, prompt: str | None = None, n: int = 16, report=None) -> dict:
    from trainer.verify import verify
    say = report or (lambda _: None)
    say("Running the engine and the independent reference…")
    r = verify(model_path, prompt=prompt, n=n)
    r["answer"], r["end_marker"] = until_end_of_turn(r["generated_text"])
    return r


def until_end_of_turn(text: str) -> tuple[str, str | None]:
    """The text up to the first end-of-turn or end-of-text marker, and that marker (None if there is none)."""
    cut, marker = len(text), None
    for m in END_OF_TURN:
        i = text.find(m)
        if 0 <= i < cut:
            cut, marker = i, m
    return text[:cut], marker
