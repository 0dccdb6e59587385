"""Every causal-LM architecture transformers ships: our parameter count of its default config
equals the count of the model transformers builds on the meta device, or the architecture is on
the refusal list of data/architectures.yaml and a config of it is refused.

Runs where torch and transformers are installed (the `measure` extra); models are built on the
meta device (no weights), and the counts are cached per transformers/torch version in pytest's
cache, so a warm run only rebuilds the configs.
"""

from __future__ import annotations

import hashlib
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from trainplan.inputs.architecture_families import (  # noqa: E402
    module_path_types,
    refused_model_types,
    supported_model_types,
)
from trainplan.inputs.hf import spec_from_config  # noqa: E402
from trainplan.inputs.resolve import record_spec  # noqa: E402
from trainplan.specs.errors import ConfigError  # noqa: E402
from trainplan.specs.weights import block_linears, total_params  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)


def causal_lm_types() -> list[str]:
    """The model types of transformers' causal-LM auto mapping."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


#: Default configs transformers 5.24 cannot build a model from as shipped, and the one change that
#: makes each build: model_type -> (the keys it sets, why). Each sets what every published config of
#: the type has and the modeling file reads without a fallback.
BUILD_PATCHES: dict[str, tuple[dict[str, Any], str]] = {
    "cohere_compass_text": (
        {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
        "rope_parameters defaults to {} and the rotary embedding reads one entry per layer type "
        "(KeyError 'full_attention'); the default's only layer type gets the default rope",
    ),
    "dbrx": (
        {"attn_config": {"rope_theta": 500000}},
        "DbrxAttentionConfig has no rope_theta and the attention reads attn_config.rope_theta "
        "(AttributeError); databricks/dbrx-instruct's config.json sets it in attn_config",
    ),
    "dots1": (
        {"n_routed_experts": 128, "n_shared_experts": 2, "num_experts_per_tok": 6},
        "n_routed_experts, n_shared_experts and num_experts_per_tok default to None and the experts "
        "call torch.empty(None, ...) (TypeError); dots.llm1 routes each token to 6 of 128 experts "
        "beside 2 shared ones (dots.llm1 technical report, arXiv:2506.05767)",
    ),
    "hunyuan_v1_dense": (
        {"head_dim": 128},
        "head_dim defaults to None and the attention takes head_dim**-0.5 (TypeError); "
        "128 = hidden_size / num_attention_heads, the width the query/key norms are built at",
    ),
    "hunyuan_v1_moe": (
        {"head_dim": 128},
        "head_dim defaults to None and the attention takes head_dim**-0.5 (TypeError); "
        "128 = hidden_size / num_attention_heads, the width the query/key norms are built at",
    ),
    "ministral": (
        {"head_dim": 128},
        "head_dim defaults to None and the attention takes head_dim**-0.5 (TypeError); "
        "mistralai/Ministral-8B-Instruct-2410's config.json sets 128 = hidden_size / num_attention_heads",
    ),
    "nemotron": (
        {"num_key_value_heads": 8},
        "num_key_value_heads defaults to None and the attention divides by it (TypeError); "
        "the default is Nemotron-4 15B's shape, which has 8 key/value heads (Nemotron-4 15B "
        "Technical Report, arXiv:2402.16819, Table 1)",
    ),
}


def default_config(model_type: str) -> dict[str, Any] | None:
    """The default config of `model_type` as a config.json dict (with its BUILD_PATCHES change,
    if any), or None if transformers cannot build it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = dict(transformers.AutoConfig.for_model(model_type).to_dict())
    except Exception:  # a config class that rejects its own defaults
        return None
    for key, value in BUILD_PATCHES.get(model_type, ({}, ""))[0].items():
        sub = config.get(key)  # a sub-config gets the patched keys, keeping its other defaults
        config[key] = {**sub, **value} if isinstance(sub, dict) and isinstance(value, dict) else value
    return config


def meta_device_params(config: dict[str, Any]) -> int | None:
    """Parameters of the causal LM transformers builds from `config` on the meta device (shared
    tensors counted once), or None when it cannot build it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = dict(config)
    model_type = raw.pop("model_type")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hf_config = AutoConfig.for_model(model_type, **raw)
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(hf_config)
    except Exception:  # transformers' own failure on this config; recorded as None
        return None
    return int(sum(parameter.numel() for parameter in model.parameters()))


def meta_count(request: pytest.FixtureRequest, model_type: str) -> int | None:
    """The meta-device count of `model_type`'s (patched) default config, cached per library
    version and per patch, so a run over a few types builds only those."""
    patch = sorted(BUILD_PATCHES.get(model_type, ({}, ""))[0].items())
    digest = hashlib.sha256(repr(patch).encode()).hexdigest()[:12]
    key = f"trainplan/meta-params/{transformers.__version__}/{torch.__version__}/{model_type}/{digest}"
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    cached = cache.get(key, None) if cache else None
    if isinstance(cached, dict):
        count: int | None = cached["params"]
        return count
    config = default_config(model_type)
    count = None if config is None else meta_device_params(config)
    if cache:
        cache.set(key, {"params": count})
    return count


@pytest.mark.parametrize("model_type", causal_lm_types())
def test_default_config_is_exact_or_refused(model_type: str, request: pytest.FixtureRequest) -> None:
    refused = refused_model_types()
    config = default_config(model_type)
    if model_type in refused:
        assert model_type not in supported_model_types()
        if config is not None:
            with pytest.raises(ConfigError):
                spec_from_config(config, model_type)
        return
    expected = meta_count(request, model_type)
    assert config is not None and expected is not None, (
        f"transformers cannot build {model_type}'s default config: add it to the refusal list"
    )
    ours = total_params(spec_from_config(config, model_type))
    assert ours == expected


@pytest.mark.parametrize("model_type", sorted(BUILD_PATCHES))
def test_build_patch_is_needed(model_type: str) -> None:
    # a patch is there because transformers cannot build the unpatched default; when it can, the
    # patch is stale and the default itself must be counted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = dict(transformers.AutoConfig.for_model(model_type).to_dict())
    assert meta_device_params(config) is None


def test_refusal_list_names_only_shipped_types() -> None:
    # a refusal of a model type transformers no longer ships is stale
    shipped = set(causal_lm_types())
    assert set(refused_model_types()) <= shipped


def test_refusal_message_names_field_reason_and_supported() -> None:
    config = default_config("xlstm")
    assert config is not None
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "xlstm")
    assert error.value.field == "model_type"
    assert "xLSTM" in error.value.message and "mamba2" in error.value.message


def _hybrid_records() -> list[Any]:
    from trainplan.inputs.catalogs.models import model_records

    return [r for r in model_records() if any(b.ssm or b.mixer for b in record_spec(r).blocks)]


@pytest.mark.parametrize("record", _hybrid_records(), ids=lambda r: r.name)
def test_hybrid_catalog_records_match_transformers(record: Any) -> None:
    # the recorded meta-device count is what transformers builds from the record's own config
    assert record.meta_device_params == meta_device_params(dict(record.config))
    assert total_params(record_spec(record)) == record.meta_device_params


@pytest.mark.parametrize("model_type", ["glm4_moe_lite", "hy_v3", "axk1"])
def test_config_without_mlp_layer_types_reads_first_layer_dense(model_type: str) -> None:
    # a config.json that omits mlp_layer_types gets one dense layer, then MoE, from the config class;
    # the table's default first_k_dense_replace: 1 must give the same count
    config = default_config(model_type)
    assert config is not None
    config.pop("mlp_layer_types")
    config.pop("first_k_dense_replace", None)
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, model_type)) == expected


def test_bert_cross_attention_matches_transformers() -> None:
    config = default_config("bert")
    assert config is not None
    config.update(add_cross_attention=True, is_decoder=True)
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, "bert")) == expected


@pytest.mark.parametrize(
    ("model_type", "overrides"),
    [
        # three languages' adapters (one runs per token), adapter LayerNorms, the pre-norm final LayerNorm
        ("xmod", {"languages": ["en_XX", "de_DE", "fr_XX"], "pre_norm": True, "adapter_layer_norm": True}),
        ("xmod", {"adapter_reduction_factor": 4}),
        # a factorised embedding: embeddings_project and a head transform back to embedding_size
        ("roformer", {"embedding_size": 256}),
        ("electra", {"embedding_size": 256, "tie_word_embeddings": False}),
        ("bert-generation", {"add_cross_attention": True, "is_decoder": True}),
        # ERNIE 4.5: MoE every other layer up to layer 20; biased shared experts beside bias-free routed ones
        (
            "ernie4_5_moe",
            {
                "use_bias": True,
                "moe_layer_interval": 2,
                "moe_layer_end_index": 20,
                "tie_word_embeddings": False,
            },
        ),
        # untied heads; GPT-NeoX-Japanese's one last-layer attention bias stays one vector
        ("ctrl", {"tie_word_embeddings": False, "n_layer": 3}),
        (
            "gpt_neox_japanese",
            {"tie_word_embeddings": False, "num_hidden_layers": 3, "intermediate_multiple_size": 2},
        ),
        # gated attention: Laguna's per-channel softplus gate, AFMoE's two dense first layers,
        # Beam's gate bias
        (
            "laguna",
            {
                "gating": "per-element",
                "num_hidden_layers": 3,
                "mlp_layer_types": ["dense", "sparse", "sparse"],
                "layer_types": None,
                "num_attention_heads_per_layer": None,
                "num_experts": 8,
            },
        ),
        ("afmoe", {"num_dense_layers": 2, "num_hidden_layers": 4, "layer_types": None, "num_experts": 8}),
        (
            "beam",
            {
                "num_hidden_layers": 3,
                "mlp_layer_types": ["dense", "sparse", "sparse"],
                "layer_types": None,
                "num_experts": 8,
            },
        ),
        # BART-style: BigBird-Pegasus with attention biases, an untied Whisper decoder
        ("bigbird_pegasus", {"use_bias": True, "decoder_layers": 3}),
        ("whisper", {"tie_word_embeddings": False, "decoder_layers": 2, "max_target_positions": 1024}),
        # ModernBERT's decoder with every bias switched on and an unbiased decoder
        (
            "modernbert-decoder",
            {
                "norm_bias": True,
                "classifier_bias": True,
                "attention_bias": True,
                "mlp_bias": True,
                "num_hidden_layers": 3,
                "layer_types": None,
                "decoder_bias": False,
            },
        ),
        # XLM: three languages' embeddings (or none without use_lang_emb), ReLU or sinusoidal positions
        ("xlm", {"n_langs": 3, "n_layers": 2, "gelu_activation": False}),
        ("xlm", {"n_langs": 3, "use_lang_emb": False, "n_layers": 2, "sinusoidal_embeddings": True}),
        # Aria's text MoE without shared experts; Fuyu's patch embedding at another patch size
        ("aria_text", {"moe_num_shared_experts": 0, "num_hidden_layers": 2, "moe_topk": 3}),
        ("fuyu", {"patch_size": 16, "num_channels": 1}),
        # RoCBert without the shape input, or without map_inputs_layer
        ("roc_bert", {"enable_shape": False, "num_hidden_layers": 2}),
        ("roc_bert", {"concat_input": False, "num_hidden_layers": 2}),
        # MiMo-V2-Flash: sliding layers with twice the key/value heads and sinks, narrower values
        (
            "mimo_v2_flash",
            {
                "num_hidden_layers": 4,
                "n_routed_experts": 8,
                "v_head_dim": 64,
                "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"],
                "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"],
            },
        ),
        # Gemma 4 without per_layer_config: the config class gives full-attention layers global_head_dim
        (
            "gemma4_text",
            {
                "per_layer_config": None,
                "global_head_dim": 384,
                "num_hidden_layers": 6,
                "layer_types": [
                    "sliding_attention",
                    "sliding_attention",
                    "full_attention",
                    "sliding_attention",
                    "sliding_attention",
                    "full_attention",
                ],
            },
        ),
        (
            "gemma4_unified_text",
            {
                "per_layer_config": None,
                "num_hidden_layers": 6,
                "layer_types": [
                    "sliding_attention",
                    "sliding_attention",
                    "full_attention",
                    "sliding_attention",
                    "sliding_attention",
                    "full_attention",
                ],
            },
        ),
        # Zamba (v1) without a layer list: ZambaConfig's period and offset place the hybrid layers (2 and
        # 7 of 8); the attention width, head width and dt rank follow the smaller hidden size
        (
            "zamba",
            {
                "hidden_size": 64,
                "num_hidden_layers": 8,
                "intermediate_size": 128,
                "num_attention_heads": 4,
                "num_key_value_heads": 4,
                "layers_block_type": None,
                "attention_hidden_size": None,
                "attention_head_dim": None,
                "mamba_dt_rank": None,
                "vocab_size": 100,
            },
        ),
        # RemBERT's decoupled input and output embedding widths
        ("rembert", {"input_embedding_size": 128, "output_embedding_size": 512, "num_hidden_layers": 2}),
        # CPM-Ant's prompt rows, segment table and shared relative position bias at other sizes
        (
            "cpmant",
            {
                "prompt_types": 4,
                "prompt_length": 8,
                "segment_types": 6,
                "num_hidden_layers": 2,
                "position_bias_num_buckets": 64,
            },
        ),
        # HunYuan MoE with 8 routed experts: experts and the shared MLP are intermediate_size wide,
        # whatever moe_intermediate_size says; Nemotron with every bias and a tied head
        (
            "hunyuan_v1_moe",
            {"num_experts": 8, "moe_topk": 2, "num_hidden_layers": 2, "moe_intermediate_size": 512},
        ),
        (
            "nemotron",
            {"attention_bias": True, "mlp_bias": True, "num_hidden_layers": 2, "tie_word_embeddings": True},
        ),
        # dots.llm1 with its first layer dense, as its checkpoints have it
        ("dots1", {"num_hidden_layers": 3, "first_k_dense_replace": 1, "layer_types": None}),
        # DBRX's published shape in two layers: 8 key/value heads, 16 experts, top-4
        (
            "dbrx",
            {
                "n_layers": 2,
                "d_model": 6144,
                "n_heads": 48,
                "vocab_size": 100352,
                "attn_config": {"kv_n_heads": 8, "clip_qkv": 8, "rope_theta": 500000},
                "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4},
            },
        ),
        # GIT over 6 frames (a temporal embedding each) with a tied head
        ("git", {"num_image_with_embedding": 6, "tie_word_embeddings": True}),
        # Moshi's text transformer with grouped key/value heads and a narrower gated MLP
        ("moshi", {"num_key_value_heads": 8, "num_hidden_layers": 2, "ffn_dim": 1024}),
        # MiniMax-M3 with a dense first layer (dense_intermediate_size) before two MoE layers
        (
            "minimax_m3_vl_text",
            {
                "num_hidden_layers": 3,
                "mlp_layer_types": ["dense", "sparse", "sparse"],
                "layer_types": ["full_attention"] * 3,
                "num_local_experts": 8,
            },
        ),
        # XLNet untied, with another head width and a ReLU feed-forward
        (
            "xlnet",
            {"tie_word_embeddings": False, "n_layer": 3, "d_head": 32, "n_head": 32, "ff_activation": "relu"},
        ),
        # MOSS-Transcribe-Diarize untied by the wrapper's flag, two frames merged, a bias-free projector
        (
            "moss_transcribe_diarize",
            {"tie_word_embeddings": False, "audio_merge_size": 2, "projector_bias": False},
        ),
        # the sparse-attention indexer on a smaller DeepSeek-V3.2 (4 layers, 1 dense)
        (
            "deepseek_v32",
            {
                "num_hidden_layers": 4,
                "first_k_dense_replace": 1,
                "mlp_layer_types": None,
                "layer_types": None,
                "n_routed_experts": 8,
                "index_n_heads": 8,
                "index_head_dim": 64,
            },
        ),
    ],
)
def test_variant_configs_match_transformers(model_type: str, overrides: dict[str, Any]) -> None:
    # settings the default configs leave off are counted as transformers builds them
    config = default_config(model_type)
    assert config is not None
    config.update(overrides)
    config = {key: value for key, value in config.items() if value is not None}
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, model_type)) == expected


def test_per_layer_head_counts_are_refused_by_entry() -> None:
    config = default_config("laguna")
    assert config is not None
    config["num_attention_heads_per_layer"] = [48] * (config["num_hidden_layers"] - 1) + [32]
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "laguna")
    assert error.value.field == f"num_attention_heads_per_layer[{config['num_hidden_layers'] - 1}]"


def test_adaptive_softmax_xlm_is_refused_and_force_lifts_it() -> None:
    config = default_config("xlm")
    assert config is not None
    config["asm"] = True
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "xlm")
    assert error.value.field == "asm"
    forced = spec_from_config(config, "xlm", force=True)
    assert forced.approximations[0].startswith(
        "force: asm=True: the adaptive-softmax output layer is not modelled"
    )


def test_per_layer_overrides_beyond_attention_widths_are_refused() -> None:
    config = default_config("gemma4_text")
    assert config is not None
    config["per_layer_config"] = {"05": {"head_dim": 512, "intermediate_size": 4096}}
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "gemma4_text")
    assert error.value.field == "per_layer_config.05.intermediate_size"


def test_mllama_image_layers_elsewhere_match_transformers() -> None:
    # image layers first and last, in a five-layer text model
    config = default_config("mllama")
    assert config is not None
    config["text_config"] = {
        **config["text_config"],
        "num_hidden_layers": 5,
        "cross_attention_layers": [0, 4],
    }
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, "mllama")) == expected


def test_got_ocr2_image_encoder_variants_match_transformers() -> None:
    # a smaller SAM encoder: global attention in layers 0 and 3, no qkv bias, a 32 x 32 grid
    config = default_config("got_ocr2")
    assert config is not None
    config["vision_config"] = {
        **config["vision_config"],
        "num_hidden_layers": 4,
        "global_attn_indexes": [0, 3],
        "qkv_bias": False,
        "image_size": 512,
        "output_channels": 128,
    }
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, "got_ocr2")) == expected


@pytest.mark.parametrize(
    ("model_type", "drop"),
    [("hunyuan_v1_moe", ["num_experts", "moe_topk"]), ("mllama", []), ("dbrx", [])],
)
def test_config_class_defaults_fill_what_a_config_leaves_out(model_type: str, drop: list[str]) -> None:
    # a saved config.json omits values equal to the config class's defaults; the table's defaults
    # must give the same count (DBRX's sub-dicts emptied, Mllama without cross_attention_layers)
    config = default_config(model_type)
    assert config is not None
    for key in drop:
        config.pop(key)
    if model_type == "dbrx":
        config.update(attn_config={"rope_theta": 500000}, ffn_config={})
        config.pop("num_key_value_heads")
    if model_type == "mllama":
        config["text_config"] = {
            k: v for k, v in config["text_config"].items() if k != "cross_attention_layers"
        }
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, model_type)) == expected


def test_phi4_multimodal_embedder_variants_match_transformers() -> None:
    # fewer subsampling stages, a symmetric bias table, a wider depthwise conv, smaller towers
    config = default_config("phi4_multimodal")
    assert config is not None
    config["audio_config"] = {
        **config["audio_config"],
        "time_reduction": 4,
        "bias_symmetric": True,
        "num_blocks": 2,
        "depthwise_multiplier": 2,
        "depthwise_separable_out_channel": 512,
        "ext_pw_out_channel": 768,
        "kernel_size": 5,
        "downsample_rate": 2,
    }
    config["vision_config"] = {**config["vision_config"], "num_hidden_layers": 2, "image_size": 224}
    config["num_hidden_layers"] = 2
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, "phi4_multimodal")) == expected


_SLIDING, _FULL = "sliding_attention", "full_attention"


@pytest.mark.parametrize("model_type", ["gemma4_text", "gemma4_unified_text"])
@pytest.mark.parametrize("double_wide", [False, True])
def test_gemma4_kv_shared_layers_match_transformers(model_type: str, double_wide: bool) -> None:
    # the last 3 of 6 layers reuse the keys and values of the last earlier layer of their kind
    # (no k_proj, v_proj, k_norm), with twice the MLP width under use_double_wide_mlp
    config = default_config(model_type)
    assert config is not None
    config.update(
        hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, global_head_dim=32, vocab_size=512,
        vocab_size_per_layer_input=512, layer_types=[_SLIDING, _SLIDING, _FULL] * 2,
        num_kv_shared_layers=3, use_double_wide_mlp=double_wide, per_layer_config=None,
    )  # fmt: skip
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, model_type)) == expected


def test_hrm_stacks_match_transformers() -> None:
    # two stacks of 3 layers, whatever the cycles: the weights exist once
    config = default_config("hrm_text")
    assert config is not None
    config.update(
        hidden_size=64, intermediate_size=96, num_attention_heads=4, head_dim=16, vocab_size=100,
        num_layers_per_stack=3, num_hidden_layers=3 * 3 * 3, H_cycles=3, L_cycles=2, L_bp_cycles=[1, 2],
    )  # fmt: skip
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, "hrm_text")) == expected


def test_gemma4_assistant_without_sharing_in_its_text_config_matches_transformers() -> None:
    # the assistant's config class makes every layer KV-shared when text_config leaves it 0
    text = default_config("gemma4_unified_text")
    assert text is not None
    text.update(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, global_head_dim=32, vocab_size=512,
        layer_types=[_SLIDING, _SLIDING, _FULL], num_kv_shared_layers=0, per_layer_config=None,
    )  # fmt: skip
    config = {"model_type": "gemma4_unified_assistant", "backbone_hidden_size": 128, "text_config": text}
    expected = meta_device_params(config)
    assert expected is not None
    assert total_params(spec_from_config(config, "gemma4_unified_assistant")) == expected


def _layer_linears_of(model: Any) -> set[str]:
    """The nn.Linear module names inside a built model's decoder layers."""
    prefixes = ("model.layers.", "model.language_model.layers.")
    return {
        name
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and name.startswith(prefixes)
    }


@pytest.mark.parametrize("model_type", sorted(module_path_types()))
def test_module_paths_are_the_ones_transformers_builds(model_type: str) -> None:
    """For the model types whose module paths are modelled (architectures.yaml module_paths), the
    full names of every decoder layer's linears, as a regular-expression LoRA target is matched
    against them, are exactly the nn.Linear names of the model transformers builds (the
    conditional-generation class of a multimodal wrapper), for a two-layer default config."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    from trainplan.engine.terms.params import _stacked, module_path

    config = default_config(model_type)
    assert config is not None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    text["num_hidden_layers"] = 2
    for key in ("layer_types", "mlp_layer_types"):
        if isinstance(text.get(key), list):
            text[key] = text[key][:2]
    raw = dict(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_config = AutoConfig.for_model(raw.pop("model_type"), **raw)
        with torch.device("meta"):
            try:
                model = AutoModelForImageTextToText.from_config(hf_config)
            except ValueError:  # not a multimodal wrapper
                model = AutoModelForCausalLM.from_config(hf_config)
    spec = spec_from_config(config, model_type)
    ours = set()
    for block, start in _stacked(spec):
        for linear in block_linears(block, spec.hidden_size):
            for index in range(start, start + block.count):
                path = module_path(block, linear, index)
                if path is not None:
                    ours.add(path)
    assert ours == _layer_linears_of(model)
