"""The bundled default model: it loads, passes `petit verify` (as CI must show), answers like its table says,
and the README's accuracy table is the one measured for these exact files."""
import json
import os

import pytest

import petit
from petit.cli import main
from trainer.evaluate import answer, table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(ROOT, "assets")


@pytest.mark.parametrize("name", ["default-q8_0.petit", "default-q4_0.petit"])
def test_shipped_models_pass_verify(name, capsys):
    assert main(["verify", os.path.join(ASSETS, name)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("VERIFY PASS")


@pytest.mark.parametrize("name", ["default-q8_0.petit", "default-q4_0.petit"])
def test_shipped_models_answer_a_held_out_question(name):
    model = petit.load(os.path.join(ASSETS, name))
    assert model.metadata["chat_template"].startswith("{% for message in messages %}")
    assert answer(model, "what is 12 plus 7?") == "19"
    assert answer(model, "which is bigger, 2 or 16?") == "16"


def test_readme_table_is_the_measured_one():
    with open(os.path.join(ASSETS, "default-model-eval.json")) as f:
        measured = table(json.load(f))
    with open(os.path.join(ROOT, "README.md")) as f:
        assert measured in f.read()
