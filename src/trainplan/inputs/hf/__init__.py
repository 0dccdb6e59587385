"""Hugging Face config.json -> ModelSpec. The only package that knows Hugging Face key names.

How a decoder's config maps to blocks is declared per `model_type` family in the architecture
table (`architecture_families.py`, `data/architectures.yaml`): key aliases, plain or gated MLP, biases, norms,
parallel blocks, MoE interleaving, and the attention / Mamba layer order of SSM hybrids.
Encoder-decoder T5/mT5/Flan-T5, GPT-2, BERT-style and BART-style decoders have readers of their
own; multimodal configs whose language model sits under `text_config`/`language_config` add a
ViT-style `vision_config`.
A model type on the table's refusal list, or an unknown one whose config names a layout we do
not model, is refused with the field and value; other unknown types are read with the keys
Llama-style configs share.
diffusers denoiser configs (a `_class_name`: FLUX, SD3, Wan, UNet) and V-JEPA 2 have readers of
their own (`diffusers`, `unet`, `jepa`); a pipeline folder's VAE config gives the latent geometry
(`pipeline`), and its VAE and text encoders are counted as frozen components (`vae`, `encoders`).
"""

from trainplan.inputs.hf.reading import context_window, denoiser_spec, language_config, spec_from_config

__all__ = ["context_window", "denoiser_spec", "language_config", "spec_from_config"]
