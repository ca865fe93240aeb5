"""Running the verifier (trainer.verify.verify) for the Verify tab. verify() reports, besides the worst and mean
errors, `position_errors`: per position, the largest |engine - reference| over the vocabulary divided by the logit
scale (the quantity it holds to THRESHOLDS[weights]["max_rel_err"]), which the tab plots."""


def run(model_path: str, prompt: str | None = None, n: int = 16, report=None) -> dict:
    from trainer.verify import verify
    say = report or (lambda _: None)
    say("Running the engine and the independent reference…")
    return verify(model_path, prompt=prompt, n=n)
