"""A trained checkpoint, exported to .petit, gives the engine the same logits as the trainer's forward."""

import io

import numpy as np
import pytest

import petit
from trainer.chat_corpus import make_split
from trainer.export import export_petit
from trainer.model import forward
from trainer.train import TrainConfig, train


@pytest.mark.parametrize("tied", [True, False])
def test_engine_logits_match_trainer(tmp_path, tied):
    config = TrainConfig(tokenizer="bpe", vocab_size=300, n_layers=2, dim=32, n_heads=4, n_kv_heads=2, ffn_dim=64,
                         context=48, steps=3, batch_size=4, eval_interval=3, checkpoint_interval=0,
                         tie_embeddings=tied, seed=11)
    result = train(config, make_split(1, 150).train_text, chat=True, out_dir=tmp_path / "ck", log=io.StringIO())
    export_petit(tmp_path / "ck", tmp_path / "m.petit")
    model = petit.load(tmp_path / "m.petit")
    try:
        ids = model.tokenizer.encode("<|im_start|>user\nwhat is 3 + 4?<|im_end|>\n<|im_start|>assistant\n")
        theirs = np.asarray(model.logits(ids))
        ours, _ = forward(result.params, result.model_config, np.array([ids]))
        np.testing.assert_allclose(theirs, ours[0], rtol=1e-4, atol=1e-4)
        assert np.array_equal(theirs.argmax(-1), ours[0].argmax(-1))
        assert model.metadata["chat_template"] == result.chat_template
    finally:
        model.close()


def test_export_needs_a_tokenizer(tmp_path):
    config = TrainConfig(vocab_size=10, n_layers=1, dim=8, n_heads=2, n_kv_heads=1, ffn_dim=16, context=8, steps=1,
                         batch_size=2, checkpoint_interval=0)
    train(config, np.tile(np.arange(10), 10), out_dir=tmp_path / "ck", log=io.StringIO())
    with pytest.raises(ValueError, match="has no tokenizer"):
        export_petit(tmp_path / "ck", tmp_path / "m.petit")
