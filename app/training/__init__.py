"""Train, export and verify a model of your own, for a person: the Train, Export and Verify tabs of the window.

    TrainPanel   the training wizard (train_form.py) and its run (run.py, a QThread over trainer.train)
    FinetunePanel  LoRA adapters on a model Petit opens (trainer.lora), paused and resumed through its checkpoint
    ExportPanel  fp32 / q8_0 / q4_0 files of a checkpoint, their sizes and ratios to fp32 (exports.py)
    VerifyPanel  the verifier, its verdict and the error at each position (verification.py)

They pass the latest checkpoint and exported model to each other through a shared TrainingHub (hub.py). Every
engine call runs on a Worker thread (app.threads); each panel's shutdown() stops and joins its threads.
"""
from app.training.export_panel import ExportPanel
from app.training.finetune_panel import FinetunePanel
from app.training.train_panel import TrainPanel
from app.training.verify_panel import VerifyPanel

__all__ = ["TrainPanel", "FinetunePanel", "ExportPanel", "VerifyPanel"]
