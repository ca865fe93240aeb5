"""The encoders of embedding models (issue 35: KIND "encoder", hidden states for petit.embed, no logits); their
model_types go to petit.models.ENCODERS, not MODEL_TYPES, whose tests (logit parity, petit verify) do not apply."""

# model_type -> its module in this folder
MODEL_TYPES = {
    "bert": "bert",
    "modernbert": "modernbert",
    "nomic_bert": "nomic_bert",
    "roberta": "xlm_roberta",
    "xlm-roberta": "xlm_roberta",
}

# the modules here that are part of a family, not one: module -> the modules of its family that import it
HELPERS = {}
