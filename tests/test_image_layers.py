"""Image parts a causal-LM class holds beside its text layers: Mllama's cross-attention image
layers, which a text-only step skips (weights only; the step's activations and FLOPs are those of
its self-attention layers), GIT's CLIP and GOT-OCR 2.0's SAM image encoders and MOSS-Transcribe-Diarize's
audio encoder (hand-computed counts)."""

from __future__ import annotations

from typing import Any

import pytest

from trainplan.engine.estimate import estimate
from trainplan.inputs.hf import spec_from_config
from trainplan.specs.errors import ConfigError
from trainplan.specs.scenario import Scenario
from trainplan.specs.weights import total_params

# Mllama's text model: h 64, 4 heads of 16 (2 key/value heads), MLP 128, 4 layers of which 1 and 3
# are cross-attention image layers, vocabulary 100
TINY_MLLAMA: dict[str, Any] = {
    "model_type": "mllama",
    "text_config": {
        "model_type": "mllama_text_model", "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "num_hidden_layers": 4,
        "cross_attention_layers": [1, 3], "vocab_size": 100, "tie_word_embeddings": False,
    },
    "vision_config": {"hidden_size": 32, "num_hidden_layers": 2},
}  # fmt: skip
# the same two self-attention layers as a Llama
TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "num_hidden_layers": 2, "vocab_size": 100, "tie_word_embeddings": False,
}  # fmt: skip


def test_image_layers_params_by_hand() -> None:
    # self-attention layer: q 64x64 4,096 + k, v 2 x 32x64 4,096 + o 4,096 + MLP 3 x 64x128 24,576
    #   + 2 norms 128                                                      -> 36,992 (x 2 = 73,984)
    # image layer: the same matrices + q/k norms 2 x 16 + 2 tanh gates     -> 37,026 (x 2 = 74,052)
    # embedding (100 + 8) x 64 = 6,912; head 100 x 64 = 6,400; final norm 64
    # total 73,984 + 74,052 + 6,912 + 6,400 + 64                           -> 161,412
    spec = spec_from_config(TINY_MLLAMA, "tiny-mllama")
    assert total_params(spec) == 161_412
    assert spec.num_layers == 2
    (image,) = [extra for extra in spec.extras if extra.name == "image_cross_attention_layers"]
    assert image.params == 74_052
    assert not image.trainable
    # the vision tower is not part of the causal LM
    assert [extra.name for extra in spec.extras] == ["learned_vectors", "image_cross_attention_layers"]


def test_text_only_step_runs_the_self_attention_layers_only() -> None:
    scenario = Scenario(model="x", method="full", seq_len=256, micro_batch=2, grad_accum=1)
    mllama = estimate(scenario, model=spec_from_config(TINY_MLLAMA, "tiny-mllama"))
    llama = estimate(scenario, model=spec_from_config(TINY_LLAMA, "tiny-llama"))
    # the image layers hold weights; no gradient or optimizer state (a skipped layer gets no grad)
    assert mllama.params.total - llama.params.total == 74_052 + 8 * 64
    assert mllama.params.trainable - llama.params.trainable == 8 * 64
    forward = {p.name: p for p in mllama.phases}["forward"]
    llama_forward = {p.name: p for p in llama.phases}["forward"]
    assert forward.term("activations").value == llama_forward.term("activations").value
    assert mllama.time is not None and llama.time is not None
    assert mllama.time.flops.total == llama.time.flops.total


def test_image_layers_default_to_the_config_class_list() -> None:
    # MllamaTextConfig's cross_attention_layers when a config leaves it out: 8 of 40 layers
    text = {**TINY_MLLAMA["text_config"], "num_hidden_layers": 40}
    del text["cross_attention_layers"]
    spec = spec_from_config({**TINY_MLLAMA, "text_config": text}, "tiny-mllama")
    assert spec.num_layers == 32
    (image,) = [extra for extra in spec.extras if extra.name == "image_cross_attention_layers"]
    assert image.params == 8 * 37_026


@pytest.mark.parametrize("layers", [[0, 4], [0, 1, 2, 3], "3", [1, 1]])
def test_image_layer_indices_are_checked(layers: Any) -> None:
    config = {**TINY_MLLAMA, "text_config": {**TINY_MLLAMA["text_config"], "cross_attention_layers": layers}}
    with pytest.raises(ConfigError) as error:
        spec_from_config(config, "tiny-mllama")
    assert error.value.field == "cross_attention_layers"


# GitConfig's defaults: BERT-base text layers (6) over a CLIP ViT-B/16 at 224 px
GIT_BASE: dict[str, Any] = {
    "model_type": "git", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 6,
    "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 1024,
    "tie_word_embeddings": False,
    "vision_config": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                      "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 16},
}  # fmt: skip


def test_git_params_by_hand() -> None:
    # a layer (text or vision): q/k/v/o 4 x (768^2 + 768) 2,362,368 + fc 2 x 768 x 3072 + 3072 + 768
    #   + 2 LayerNorms 3,072                                                -> 7,087,872
    # CLIP: patch conv 3 x 16^2 x 768 589,824 + class 768 + (196 + 1) x 768 positions 151,296
    #   + pre- and post-LayerNorm 3,072 + 12 layers 85,054,464              -> 85,799,424
    # projection 768^2 + 768 + LayerNorm 1,536                              -> 592,128
    # text: words 30522 x 768 23,440,896 + positions 1024 x 768 786,432 + LayerNorm 1,536
    #   + 6 layers 42,527,232 + head 30522 x 768 + 30522 23,471,418         -> 90,227,514
    # total                                                                 -> 176,619,066
    spec = spec_from_config(GIT_BASE, "git-base")
    assert total_params(spec) == 176_619_066
    extras = {extra.name: extra.params for extra in spec.extras}
    assert extras == {"image_encoder": 85_799_424, "visual_projection": 592_128}
    assert spec.num_layers == 6


# GotOcr2Config's defaults: a SAM ViT-B at 1024 px before a Qwen 2 text model (tied head)
GOT_OCR2: dict[str, Any] = {
    "model_type": "got_ocr2",
    "text_config": {
        "model_type": "qwen2", "vocab_size": 151860, "hidden_size": 1024, "intermediate_size": 2816,
        "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
        "tie_word_embeddings": True,
    },
    "vision_config": {
        "model_type": "got_ocr2_vision", "hidden_size": 768, "output_channels": 256, "num_hidden_layers": 12,
        "num_attention_heads": 12, "num_channels": 3, "image_size": 1024, "patch_size": 16, "qkv_bias": True,
        "use_abs_pos": True, "use_rel_pos": True, "window_size": 14, "global_attn_indexes": [2, 5, 8, 11],
        "mlp_dim": 3072,
    },
}  # fmt: skip


def test_got_ocr2_params_by_hand() -> None:
    # SAM layer: 2 LayerNorms 3,072 + qkv 768 x 2304 + 2304 1,771,776 + proj 590,592
    #   + lin1/lin2 2 x 768 x 3072 + 3072 + 768 4,722,432                  -> 7,087,872 (x 12)
    # relative positions (head_dim 64): 8 windowed layers 2 x 27 x 64, 4 global 2 x 127 x 64 -> 92,672
    # positions 64 x 64 x 768 3,145,728 + patch conv 3 x 16^2 x 768 + 768 590,592
    # neck: 768 x 256 + LN 512 + 256 x 256 x 9 + LN 512 787,456            -> encoder 89,670,912
    # projector: 256 x 512 x 9 1,179,648 + 512 x 1024 x 9 4,718,592 + 1024^2 + 1024 -> 6,947,840
    # Qwen 2: 151860 x 1024 155,504,640 + 24 x 12,850,176 + final norm 1,024 -> 463,909,888
    spec = spec_from_config(GOT_OCR2, "got-ocr2")
    extras = {extra.name: extra.params for extra in spec.extras}
    assert extras == {"image_encoder": 89_670_912, "multi_modal_projector": 6_947_840}
    assert total_params(spec) == 560_528_640  # 463,909,888 + 89,670,912 + 6,947,840


def test_sam_global_layers_default_to_the_config_class_list() -> None:
    # a config.json saved without global_attn_indexes gets GotOcr2VisionConfig's [2, 5, 8, 11]
    vision = {key: value for key, value in GOT_OCR2["vision_config"].items() if key != "global_attn_indexes"}
    spec = spec_from_config({**GOT_OCR2, "vision_config": vision}, "got-ocr2")
    assert total_params(spec) == 560_528_640


# MossTranscribeDiarizeConfig's defaults: a Whisper-style audio encoder before a Qwen 3 text model; the
# wrapper ties the head (tie_word_embeddings true) though its text_config says false
MOSS: dict[str, Any] = {
    "model_type": "moss_transcribe_diarize", "audio_merge_size": 4, "projector_bias": True,
    "tie_word_embeddings": True,
    "text_config": {
        "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
        "tie_word_embeddings": False,
    },
    "audio_config": {
        "model_type": "moss_transcribe_diarize_audio", "hidden_size": 1024, "intermediate_size": 4096,
        "num_hidden_layers": 24, "num_attention_heads": 16, "num_mel_bins": 80, "max_source_positions": 1500,
    },
}  # fmt: skip


def test_moss_transcribe_diarize_params_by_hand() -> None:
    # audio: conv1 80 x 1024 x 3 + 1024 246,784 + conv2 1024 x 1024 x 3 + 1024 3,146,752
    #   + positions 1500 x 1024 1,536,000 + final LayerNorm 2,048
    #   layer: q/v/out 3 x (1024^2 + 1024) + k 1024^2 4,197,376 + 2 LayerNorms 4,096
    #   + fc1/fc2 2 x 1024 x 4096 + 4096 + 1024 8,393,728                  -> 12,595,200 (x 24)
    #                                                                        -> encoder 307,216,384
    # projector: (1024 x 4) x 1024 4,194,304 + 1024^2 1,048,576 + 2 biases 2,048 + LayerNorm 2,048
    #                                                                        -> 5,246,976
    # Qwen 3: 151936 x 1024 155,582,464 + 28 x (q/o 2 x 2048 x 1024 + k/v 2 x 1024^2 + q/k norms 256
    #   + MLP 3 x 3072 x 1024 + 2 norms 2,048 = 15,730,944) + final norm 1,024 -> 596,049,920 (tied)
    spec = spec_from_config(MOSS, "moss")
    extras = {extra.name: extra.params for extra in spec.extras}
    assert extras == {"audio_encoder": 307_216_384, "multi_modal_projector": 5_246_976}
    assert total_params(spec) == 908_513_280  # 596,049,920 + 307,216,384 + 5,246,976
    assert spec.modality == "text+audio"
    # the wrapper's flag unties the head: + 151936 x 1024; no projector biases: - 2,048
    untied = spec_from_config({**MOSS, "tie_word_embeddings": False, "projector_bias": False}, "moss")
    assert total_params(untied) == 908_513_280 + 155_582_464 - 2_048
