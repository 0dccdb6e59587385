"""Image and audio encoders that a causal-LM class holds beside its text layers, counted from the
config (transformers 5.24 modeling files): SigLIP / ViT towers, GIT's CLIP encoder, GOT-OCR 2.0's
SAM encoder, Phi-4-multimodal's image and Conformer speech embedders, MOSS-Transcribe-Diarize's
Whisper-style audio encoder. Each is a frozen component: its weights are counted, its activations
are not (a step is planned on text tokens)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainplan.inputs.hf.values import get_int
from trainplan.specs.errors import ConfigError
from trainplan.specs.model import ExtraComponent


def _sub_config(cfg: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The encoder's own config dict; ConfigError when the config does not give it."""
    sub = cfg.get(key)
    if not isinstance(sub, Mapping):
        raise ConfigError(key, "must give the encoder's sizes as an object")
    return sub


def siglip_tower(vision: Mapping[str, Any], head: bool) -> int:
    """A SigLIP-layout ViT (models/siglip/modeling_siglip.py): a biased patch convolution, a
    position per patch, layers of biased q/k/v/o and fc1/fc2 with two LayerNorms, a post-LayerNorm;
    with `head` the attention-pooling head (probe, in/out projections, LayerNorm, MLP)."""
    hidden = get_int(vision, "hidden_size")
    if "intermediate_size" not in vision and "mlp_ratio" in vision:
        inner = round(float(vision["mlp_ratio"]) * hidden)  # Janus' SigLIP config
    else:
        inner = get_int(vision, "intermediate_size")
    layers = get_int(vision, "num_hidden_layers")
    patch = get_int(vision, "patch_size")
    image = get_int(vision, "image_size")
    channels = get_int(vision, "num_channels", default=3)
    patches = (image // patch) ** 2
    per_layer = 4 * (hidden * hidden + hidden) + 2 * hidden * inner + inner + hidden + 2 * 2 * hidden
    tower = channels * patch * patch * hidden + hidden + patches * hidden + layers * per_layer + 2 * hidden
    if head:
        tower += hidden + 4 * (hidden * hidden + hidden) + 2 * hidden + 2 * hidden * inner + inner + hidden
    return tower


def clip_image_encoder(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """GIT's CLIP image encoder and its projection (transformers 5.24 models/git/modeling_git.py,
    GitVisionModel / GitProjection): a bias-free patch convolution, a class embedding, positions
    for the patches and the class token, pre- and post-LayerNorms, pre-norm layers of biased
    q/k/v/o and fc1/fc2 with two LayerNorms; then Linear(vision -> text hidden) + LayerNorm, and
    one temporal embedding of the vision width per frame when num_image_with_embedding is set."""
    vision = _sub_config(cfg, "vision_config")
    hidden = get_int(vision, "hidden_size")
    layers = get_int(vision, "num_hidden_layers")
    patches = (get_int(vision, "image_size") // get_int(vision, "patch_size")) ** 2
    # the SigLIP layout without the patch bias, plus a class embedding, its position and the
    # pre-LayerNorm: - h + h + h + 2 h
    tower = siglip_tower(vision, head=False) + 3 * hidden
    frames = get_int(cfg, "num_image_with_embedding", default=0, minimum=0)
    projection = hidden * text_hidden + text_hidden + 2 * text_hidden + frames * hidden
    return [
        ExtraComponent(
            "image_encoder",
            tower,
            note=f"CLIP ViT: {layers} layers x {hidden} hidden, {patches} patches and a class token",
        ),
        ExtraComponent(
            "visual_projection",
            projection,
            note="Linear vision -> hidden + LayerNorm"
            + (f", {frames} temporal embeddings" if frames else ""),
        ),
    ]


#: GotOcr2VisionConfig's global_attn_indexes, which a saved config.json leaves out when unchanged.
_SAM_GLOBAL_LAYERS = [2, 5, 8, 11]


def sam_image_encoder(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """GOT-OCR 2.0's SAM ViT image encoder and its projector (transformers 5.24
    models/got_ocr2/modeling_got_ocr2.py, GotOcr2VisionEncoder / GotOcr2MultiModalProjector): a
    biased patch convolution, an absolute position table over the patch grid (use_abs_pos);
    layers of two LayerNorms, a fused qkv (bias: qkv_bias), a biased proj, a biased lin1/lin2 MLP
    of mlp_dim and, with use_rel_pos, relative position tables rel_pos_h and rel_pos_w of
    2 s - 1 rows of head_dim, s the window (window_size) or the whole grid side in the
    global_attn_indexes layers; a neck of a bias-free 1x1 and 3x3 conv to output_channels, each
    followed by a LayerNorm; then two bias-free stride-2 3x3 convs to 2 x output_channels and the
    text width, and a biased Linear over the text width."""
    vision = _sub_config(cfg, "vision_config")
    hidden = get_int(vision, "hidden_size")
    heads = get_int(vision, "num_attention_heads")
    inner = get_int(vision, "mlp_dim")
    layers = get_int(vision, "num_hidden_layers")
    patch = get_int(vision, "patch_size")
    channels = get_int(vision, "num_channels", default=3)
    grid = get_int(vision, "image_size") // patch
    window = get_int(vision, "window_size", minimum=0)
    out = get_int(vision, "output_channels")
    global_layers = vision.get("global_attn_indexes", _SAM_GLOBAL_LAYERS)
    if not isinstance(global_layers, list | tuple) or not all(isinstance(i, int) for i in global_layers):
        raise ConfigError("vision_config.global_attn_indexes", "must list layer indices")
    qkv_bias = 3 * hidden if vision.get("qkv_bias", True) else 0
    per_layer = 2 * 2 * hidden + 3 * hidden * hidden + qkv_bias + hidden * hidden + hidden
    per_layer += 2 * hidden * inner + inner + hidden
    relative = 0
    if vision.get("use_rel_pos", True):
        for index in range(layers):
            side = grid if index in global_layers or window == 0 else window
            relative += 2 * (2 * side - 1) * (hidden // heads)
    positions = grid * grid * hidden if vision.get("use_abs_pos", True) else 0
    neck = hidden * out + 2 * out + out * out * 9 + 2 * out
    tower = positions + channels * patch * patch * hidden + hidden + layers * per_layer + relative + neck
    projector = out * 2 * out * 9 + 2 * out * text_hidden * 9 + text_hidden * text_hidden + text_hidden
    return [
        ExtraComponent(
            "image_encoder",
            tower,
            note=f"SAM ViT: {layers} layers x {hidden} hidden over a {grid} x {grid} patch grid, a neck",
        ),
        ExtraComponent("multi_modal_projector", projector, note="two stride-2 3x3 convs and a Linear"),
    ]


def phi4_multimodal_embedders(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """Phi-4-multimodal's image and speech embedders (models/phi4_multimodal/modeling_phi4_multimodal.py,
    Phi4MultimodalImageEmbedding / Phi4MultimodalAudioEmbedding).

    Image: a SigLIP tower with its pooling head (`siglip_tower`), two extensor vectors of the vision
    width, img_projection_up (vision -> text, biased) and img_projection_down (text -> text, biased).
    Speech: NeMo conv subsampling - a 3x3 conv from 1 channel, then log2(time_reduction) - 1 stages of
    a depthwise 3x3 and a pointwise 1x1 conv of nemo_conv_channels (all biased), and a biased Linear
    from channels x nemo_final_size to the width h; a relative attention bias table of
    bias_max_distance (x 2 unless bias_symmetric) buckets per head; num_blocks Conformer layers, each
    two MLPs (LayerNorm, biased gate_up h -> 2 i, biased down), biased q/k/v/o, a conv module
    (LayerNorm; a GLU pointwise conv h -> 2 E with b1, b2; a depthwise conv of kernel_size with
    depthwise_multiplier and a pointwise conv to depthwise_separable_out_channel D; a pointwise
    conv h -> E; all biased) and two LayerNorms; then biased up (h x downsample_rate -> text) and
    down (text -> text) projections, once for speech and once for vision-speech."""
    vision, audio = _sub_config(cfg, "vision_config"), _sub_config(cfg, "audio_config")
    width = get_int(vision, "hidden_size")
    image = siglip_tower(vision, head=True) + 2 * width
    image += width * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden
    h = get_int(audio, "hidden_size")
    inner = get_int(audio, "intermediate_size")
    heads = get_int(audio, "num_attention_heads")
    channels = get_int(audio, "nemo_conv_channels")
    stages = max(get_int(audio, "time_reduction").bit_length() - 2, 0)  # log2(time_reduction) - 1
    subsampling = (
        9 * channels + channels + stages * (9 * channels + channels + channels * channels + channels)
    )
    subsampling += channels * get_int(audio, "nemo_final_size") * h + h
    buckets = get_int(audio, "bias_max_distance") * (1 if audio.get("bias_symmetric") else 2)
    glu = get_int(audio, "ext_pw_out_channel")
    multiplier = get_int(audio, "depthwise_multiplier")
    separable = get_int(audio, "depthwise_separable_out_channel")
    kernel = get_int(audio, "kernel_size")
    mlp = 2 * h + h * 2 * inner + 2 * inner + inner * h + h
    conv = 2 * h + (h * 2 * glu + 2 * glu + 2 * glu)
    conv += h * multiplier * kernel + h * multiplier + h * multiplier * separable + separable
    conv += h * glu + glu
    layer = 2 * mlp + 4 * (h * h + h) + conv + 2 * 2 * h
    rate = get_int(audio, "downsample_rate")
    projections = 2 * (h * rate * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden)
    speech = subsampling + buckets * heads + get_int(audio, "num_blocks") * layer + projections
    return [
        ExtraComponent(
            "image_embed", image, note="SigLIP tower with pooling head, extensors, up/down projection"
        ),
        ExtraComponent(
            "audio_embed", speech, note="Conformer speech encoder and its two up/down projections"
        ),
    ]


def whisper_audio_encoder(cfg: Mapping[str, Any], text_hidden: int) -> list[ExtraComponent]:
    """MOSS-Transcribe-Diarize's Whisper-style audio encoder and its projector (transformers 5.24
    models/moss_transcribe_diarize/modeling_moss_transcribe_diarize.py, MossTranscribeDiarizeAudioModel /
    MossTranscribeDiarizeMultiModalProjector): a biased 3-wide conv from num_mel_bins to the width h and
    a biased 3-wide stride-2 conv h -> h; a position table of max_source_positions rows; layers of
    q/v/out with bias and k without (4 h^2 + 3 h), two LayerNorms and a biased fc1/fc2 of
    intermediate_size; a LayerNorm after the last layer. The projector reads audio_merge_size
    stacked frames (adaptor_input_dim = h x audio_merge_size): linear_1 to the text width, linear_2
    text -> text (both biased with projector_bias) and a biased LayerNorm."""
    audio = _sub_config(cfg, "audio_config")
    h = get_int(audio, "hidden_size", "d_model")
    inner = get_int(audio, "intermediate_size", "encoder_ffn_dim")
    layers = get_int(audio, "num_hidden_layers", "encoder_layers")
    mels = get_int(audio, "num_mel_bins")
    positions = get_int(audio, "max_source_positions")
    per_layer = 4 * h * h + 3 * h + 2 * 2 * h + 2 * h * inner + inner + h
    tower = mels * h * 3 + h + h * h * 3 + h + positions * h + layers * per_layer + 2 * h
    merged = h * get_int(cfg, "audio_merge_size")
    bias = 2 * text_hidden if cfg.get("projector_bias", True) else 0
    projector = merged * text_hidden + text_hidden * text_hidden + bias + 2 * text_hidden
    return [
        ExtraComponent(
            "audio_encoder",
            tower,
            note=f"Whisper-style encoder: {layers} layers x {h} hidden over {positions} frames",
        ),
        ExtraComponent(
            "multi_modal_projector",
            projector,
            note="Linear over stacked frames -> hidden, Linear hidden -> hidden, LayerNorm",
        ),
    ]


#: `image_encoder` values of the architecture table -> the reader of that encoder's weights.
IMAGE_ENCODERS = {
    "clip": clip_image_encoder,
    "sam": sam_image_encoder,
    "phi4_multimodal": phi4_multimodal_embedders,
    "whisper": whisper_audio_encoder,
}

#: The modality of a model that holds the encoder, where it is not "text+vision".
ENCODER_MODALITIES = {"whisper": "text+audio"}
