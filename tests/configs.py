"""Model configs shared by the test suites (hand-checkable sizes)."""

from __future__ import annotations

from typing import Any

LLAMA_8B: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
}

TINY_LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "tie_word_embeddings": False,
}

# A 3-stage DC-AE (Sana's AutoencoderDC, stride 4) with 8 latent channels, in the layout the
# reader accepts (strided-conv downsampling, interpolating upsampling), every field stated
TINY_DC_AE: dict[str, Any] = {
    "_class_name": "AutoencoderDC",
    "encoder_block_out_channels": [8, 8, 8],
    "decoder_block_out_channels": [8, 8, 8],
    "encoder_layers_per_block": [1, 1, 1],
    "decoder_layers_per_block": [1, 1, 1],
    "encoder_qkv_multiscales": [[], [], []],
    "decoder_qkv_multiscales": [[], [], []],
    "downsample_block_type": "conv",
    "upsample_block_type": "interpolate",
    "latent_channels": 8,
}

# An LTX-Video VAE of patch 2 and one scaling step (4 px a latent, 2 frames a latent frame after
# the first), 8 latent channels
TINY_LTX_VAE: dict[str, Any] = {
    "_class_name": "AutoencoderKLLTXVideo",
    "latent_channels": 8,
    "patch_size": 2,
    "block_out_channels": [4],
    "layers_per_block": [1, 1],
    "spatio_temporal_scaling": [True],
    "down_block_types": ["LTXVideoDownBlock3D"],
    "decoder_block_out_channels": [4],
    "decoder_layers_per_block": [1, 1],
    "decoder_spatio_temporal_scaling": [True],
}
