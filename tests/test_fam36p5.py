"""The fam36p group of issue 36: two types of transformers 5.25's causal-LM registry refused with what they compute
that Petit's engine does not, naming the nearest family (petit/models/nearest.py CLOSEST; docs/hf-models.md's
coverage rows come from the same text, tests/test_coverage.py)."""
import pytest

import petit


@pytest.mark.parametrize("model_type, family, starts", [
    ("blt", "llama", "Meta's Byte Latent Transformer, a model of bytes (vocabulary 260) that runs three sequence "
                     "lengths: each byte's embedding plus hashed n-gram embeddings"),
    ("reformer", "gpt2", "Google's Reformer: LSH attention layers (one shared query-key projection"),
])
def test_refused_naming_the_nearest_family_and_what_differs(model_type, family, starts):
    with pytest.raises(ValueError) as e:
        petit.models.get_family(model_type)
    assert str(e.value).startswith(f"unsupported model_type '{model_type}'; the closest family Petit runs is "
                                   f"{family} ({model_type} differs: {starts}")

