"""The wrap group of issue 30: the multimodal wrappers, as Petit converts them (the text model alone: a flat config
with the wrapper's model_type, the text model's tensor names; petit/models/wrapper.py), and the text families that
come with them. gemma3 (Gemma3ForConditionalGeneration's language model: gemma3_text, whose final soft-capping the
wrapper's forward does not apply)."""
from trainer.reference.families.gemma import gemma3_text


def gemma3(cfg, names):
    spec = gemma3_text(dict(cfg, final_logit_softcapping=None), names)
    spec.family = "gemma3"
    return spec


FAMILIES = {"gemma3": gemma3}
