"""Falcon-Mamba: Mamba with a weightless RMS norm of the time step, B and C inside each mixer (`mixer_rms_eps`)."""
from dataclasses import dataclass

from petit.models.families.recurrent import mamba
from petit.models.blocks.config import positive_number


@dataclass(kw_only=True)
class FalconMambaConfig(mamba.MambaConfig):
    mixer_rms_eps: float = 1e-6
    model_type: str = "falcon_mamba"
    _IGNORED = mamba.TRAINING_ONLY | {"use_falcon_mambapy"}

    def _validate(self):
        super()._validate()
        positive_number(self, "mixer_rms_eps")


def build(cfg: FalconMambaConfig, t):
    return mamba.build(cfg, t, inner_norm=True, eps=cfg.mixer_rms_eps)


Config = FalconMambaConfig
