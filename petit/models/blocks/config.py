"""Reading a family's config.json into its dataclass: required fields, type checks, unknown keys reported (a
warning, and kept in `unknown_keys`), features the engine does not implement refused by name."""
import dataclasses
import math
import warnings

from petit.models.blocks.rope_config import read_rope

# keys of any Hugging Face config that do not change the computation
COMMON_IGNORED = {
    "model_type", "architectures", "torch_dtype", "dtype", "transformers_version", "bos_token_id", "eos_token_id",
    "pad_token_id", "initializer_range", "use_cache", "attention_dropout", "_name_or_path", "auto_map",
    "return_dict", "output_hidden_states", "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss",
    "pruned_heads", "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "cross_attention_hidden_size",
    "add_cross_attention", "tie_encoder_decoder", "finetuning_task", "id2label", "label2id", "tokenizer_class",
    "prefix", "sep_token_id", "decoder_start_token_id", "task_specific_params", "problem_type", "cache_implementation",
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups", "diversity_penalty",
    "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty", "no_repeat_ngram_size",
    "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences", "output_scores",
    "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id", "remove_invalid_values",
    "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens", "embedding_dropout",
    "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_type", "summary_use_proj",
    "summary_activation", "summary_proj_to_labels", "summary_first_dropout", "classifier_dropout", "mlp_dropout",
    "residual_dropout", "hidden_dropout_prob", "attention_probs_dropout_prob", "pretraining_tp", "use_return_dict",
    "gradient_checkpointing",
}


class ConfigMixin:
    """For family config dataclasses. A family sets `_REQUIRED` (fields without which nothing can be computed),
    `_IGNORED` (its keys that do not change the computation) and may override `_refuse(d)` (raise for features it
    does not implement) and `_validate()` (derive and check values). The RoPE settings are read from either config
    style (transformers 4's top-level keys, transformers 5's `rope_parameters`) by `rope_config.read_rope`, which the
    `_ROPE_*` attributes tune."""

    _REQUIRED: tuple = ()
    _IGNORED: frozenset = frozenset()
    _ROPE_ALIASES: dict = {}                # a family's own top-level names of RoPE fields {key: field}
    _ROPE_LOCAL_THETA: bool = False         # sliding layers have a theta of their own (rope_local_base_freq)
    _ROPE_LAYER_TYPES: tuple = ("full_attention", "sliding_attention")     # the layer types that use RoPE
    _QUANT_METHODS: tuple = ()              # quantization_config methods the family reads (gpt_oss: its MXFP4)
    _ROPE_SLIDING_UNSCALED: bool = False    # sliding layers use the full layers' RoPE without its scaling (OLMo 3)
    _ROPE_SCALING_EXTRA: frozenset = frozenset()    # scaling keys the family reads itself (Hunyuan's NTK alpha)

    @classmethod
    def from_dict(cls, d: dict):
        """Build and validate a config.

        Raises:
            ValueError: a missing field, an unsupported feature, or inconsistent values, naming them.
        """
        if not isinstance(d, dict):
            raise ValueError("config: not a JSON object")
        d, rope_unknown = read_rope(cls, d)
        if d.get("quantization_config"):
            method = d["quantization_config"].get("quant_method", "?") if isinstance(d["quantization_config"], dict) \
                else "?"
            if method not in cls._QUANT_METHODS:    # else a family reading a released checkpoint's own format
                raise ValueError(f"config: quantization_config ({method}): pre-quantized checkpoints are not "
                                 f"supported; use the model's original (bf16 / f16 / f32) weights, Petit quantizes "
                                 f"them itself")
        cls._refuse(d)
        names = {f.name for f in dataclasses.fields(cls)} - {"unknown_keys"}
        missing = [n for n in cls._REQUIRED if d.get(n) is None]
        if missing:
            raise ValueError(f"config: missing required field(s) {', '.join(missing)}")
        unknown = sorted([k for k in d if k not in names and k not in COMMON_IGNORED and k not in cls._IGNORED]
                         + rope_unknown)
        if unknown:
            warnings.warn(f"config: ignoring unknown key(s) {', '.join(unknown)}", stacklevel=3)
        cfg = cls(**{k: v for k, v in d.items() if k in names}, unknown_keys=unknown)
        cfg._validate()
        return cfg

    @classmethod
    def _refuse(cls, d: dict) -> None:
        pass

    def _validate(self) -> None:
        pass

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("unknown_keys")
        return d


class NoDenseMlp:
    """For a family whose every MLP routes (Kolibri 1, ZAYA): transformers' config has no intermediate_size, so a
    given one is reported as an unknown key and not read, and to_dict leaves the field out (the family sets it to the
    experts' width, the scratch's). `_DENSE_NAME` names the model in the report."""

    _DENSE_NAME = ""

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, dict) and d.get("intermediate_size") is not None:
            d = {k: v for k, v in d.items() if k != "intermediate_size"}
            d[f"intermediate_size ({cls._DENSE_NAME} has no dense MLP: not read)"] = None  # reported as unknown
        return super().from_dict(d)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("intermediate_size")
        return d


def aliased(d: dict, aliases: dict) -> dict:
    """A copy of `d` with each alias key (transformers' `attribute_map`: {alias: field}) under its field's name; an
    alias and its field both given must agree."""
    d = dict(d)
    for alias, name in aliases.items():
        if alias in d:
            v = d.pop(alias)
            if d.get(name, v) != v:
                raise ValueError(f"config: {alias} {v!r} and {name} {d[name]!r} disagree (the same setting)")
            d[name] = v
    return d


def derived_head_dim(cfg, given, who: str) -> None:
    """For an attention that splits hidden_size into num_attention_heads whatever head_dim says (`who`: whose): a
    given head_dim that differs is refused rather than run as another model."""
    n = cfg.hidden_size // cfg.num_attention_heads
    if given is not None and given != n:
        raise ValueError(f"config: head_dim {given} is not hidden_size // num_attention_heads ({n}), which {who} uses "
                         f"whatever head_dim says")


def positive_int(cfg, *names) -> None:
    for name in names:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"config: {name} must be a positive integer, got {v!r}")


def positive_number(cfg, *names) -> None:
    for name in names:
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"config: {name} must be a positive number, got {v!r}")


def boolean(cfg, *names) -> None:
    for name in names:
        if not isinstance(getattr(cfg, name), bool):
            raise ValueError(f"config: {name} must be true or false, got {getattr(cfg, name)!r}")


def refuse_act(d: dict, key: str, allowed, family: str, default=None) -> None:
    act = d.get(key, default)
    if act not in allowed:
        raise ValueError(f"config: {key} {act!r} is not supported by the {family} family "
                         f"(supported: {', '.join(sorted(allowed))})")


def heads(cfg) -> None:
    """Derive num_key_value_heads and head_dim the way transformers does, and check the grouping."""
    if getattr(cfg, "num_key_value_heads", None) is None:
        cfg.num_key_value_heads = cfg.num_attention_heads
    positive_int(cfg, "num_attention_heads", "num_key_value_heads")
    if getattr(cfg, "head_dim", None) is None:
        if cfg.hidden_size % cfg.num_attention_heads:
            raise ValueError(f"config: hidden_size {cfg.hidden_size} is not divisible by num_attention_heads "
                             f"{cfg.num_attention_heads}")
        cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
    positive_int(cfg, "head_dim")
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise ValueError(f"config: num_attention_heads {cfg.num_attention_heads} is not divisible by "
                         f"num_key_value_heads {cfg.num_key_value_heads}")
    if cfg.head_dim % 2:
        raise ValueError(f"config: head_dim {cfg.head_dim} must be even for RoPE")


@dataclasses.dataclass(kw_only=True)
class DecoderConfig(ConfigMixin):
    """The fields every Llama-shaped family shares, with Hugging Face's names and Llama's defaults. A family
    subclasses it, adds its own fields and redeclares a shared one whose default differs in its transformers config
    (`max_position_embeddings: int = 8192`): transformers' defaults differ per family, and a config.json leaves out
    the keys at their default. Fields are keyword-only, so a family may add required and optional fields in any
    order. `check_decoder` checks these fields."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int | None = None      # None: same as num_attention_heads (no grouping)
    head_dim: int | None = None                 # None: hidden_size // num_attention_heads
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    tie_word_embeddings: bool = False
    model_type: str = "llama"                   # each family sets its own
    unknown_keys: list = dataclasses.field(default_factory=list, repr=False)


# the fields without which a Llama-shaped family computes nothing: DecoderConfig's fields without a default
DECODER_REQUIRED = tuple(f.name for f in dataclasses.fields(DecoderConfig)
                         if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
DecoderConfig._REQUIRED = DECODER_REQUIRED


def check_decoder(cfg, numbers=(), booleans=(), window: bool = False) -> None:
    """The checks of a DecoderConfig's fields, in this order: the sizes, the heads (num_key_value_heads and head_dim
    derived as transformers does), the family's positive `numbers` and `booleans` (its own fields and rope_theta,
    tie_word_embeddings), `sliding_window` when `window` and it is set, and the rope_scaling type. hidden_act is the
    family's to check: the activations it runs differ."""
    from petit.models.blocks.rope import scaling_type
    positive_int(cfg, "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "max_position_embeddings")
    heads(cfg)
    positive_number(cfg, *numbers)
    boolean(cfg, *booleans)
    if window and cfg.sliding_window is not None:
        positive_int(cfg, "sliding_window")
    scaling_type(cfg.rope_scaling)


# transformers' ACT2FN names -> the kernels' activations
ACT_NAMES = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
             "gelu_fast": "gelu_tanh", "relu": "relu", "relu2": "relu2"}


def activation(cfg, key: str, family: str) -> str:
    """The kernel activation for the config's `key` field, or a clear error."""
    act = getattr(cfg, key)
    if act not in ACT_NAMES:
        raise ValueError(f"config: {key} {act!r} is not supported by the {family} family "
                         f"(supported: {', '.join(sorted(ACT_NAMES))})")
    return ACT_NAMES[act]
