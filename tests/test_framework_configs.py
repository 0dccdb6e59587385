"""Training configs of other frameworks: each fixture read into the scenario written down by hand,
nothing dropped silently, the unit of every batch size, contradictions, bad files, safety."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainplan.inputs.configs import FIELD, read_configs, scenario_from_config, upload_resolver
from trainplan.inputs.configs.base import flatten
from trainplan.inputs.userfiles import parse_any
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import scenario_from_mapping

FIXTURES = Path(__file__).parent / "fixtures" / "configs"

# fixture -> (format read as, the scenario mapping expected). Each value is read off the file by
# hand; the comments give the rule where it is not a plain copy.
EXPECTED: dict[str, tuple[str, dict[str, Any]]] = {
    "axolotl/llama3-lora-8b.yml": ("axolotl", {
        "activation_offload": False,  # axolotl default: AxolotlInputConfig.activation_offloading false
        "model": "meta-llama/Llama-3.1-8B", "method": "lora", "seq_len": 4096, "micro_batch": 2,
        "grad_accum": 4, "lora": {"rank": 32, "alpha": 16, "dropout": 0.05, "targets": "all-linear"},
        "optimizer": "adamw-8bit",  # adamw_bnb_8bit
        "precision": "bf16",  # bf16: auto loads the weights in bf16: no fp32 master
        "activation_checkpointing": "full", "attention": "flash", "recipe": "axolotl",
    }),
    "axolotl/llama3-qlora-offload.yml": ("axolotl", {
        "model": "meta-llama/Llama-3.1-8B", "method": "qlora", "base_weights": "nf4",
        "lora": {"rank": 64, "alpha": 128, "dropout": 0.0,
                 "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]},
        "seq_len": 8192, "micro_batch": 1, "grad_accum": 8,
        "activation_checkpointing": "full", "activation_offload": True,  # gradient_checkpointing: offload
        "optimizer": "adamw",  # paged_adamw_32bit holds AdamW's fp32 states
        "precision": "bf16", "attention": "flash", "steps": 1200, "recipe": "axolotl",
    }),
    "axolotl/qwen-full-fsdp.yml": ("axolotl", {
        "activation_offload": False,  # axolotl default: AxolotlInputConfig.activation_offloading false
        "model": "Qwen/Qwen2.5-7B", "method": "full",  # no adapter
        "loss": "fused",  # liger_fused_linear_cross_entropy
        "kernels": "liger",  # liger_rms_norm and liger_glu_activation
        "seq_len": 8192, "micro_batch": 1, "grad_accum": 8, "activation_checkpointing": "full",
        "optimizer": "adamw-fused", "attention": "flash",
        "precision": "bf16-mixed",  # fsdp_config without fsdp_version: FSDP1, which upcasts to fp32
        "zero_stage": 3,  # fsdp: [full_shard, auto_wrap]
        "fsdp_wrap": "root",  # FSDP1 wraps the decoder layers; embedding and head in the root unit
        "recipe": "axolotl",
    }),
    "axolotl/mistral-full-zero3.yml": ("axolotl", {
        "activation_offload": False,  # axolotl default: AxolotlInputConfig.activation_offloading false
        "model": "mistralai/Mistral-7B-v0.3", "method": "full", "seq_len": 2048, "micro_batch": 2,
        "grad_accum": 2, "activation_checkpointing": "full", "optimizer": "adamw",
        "precision": "bf16-mixed",  # bf16 under DeepSpeed (bf16 auto): fp32 master in ZeRO
        "attention": "sdpa", "zero_stage": 3, "recipe": "axolotl",
        "zero3_master": "separate",  # DeepSpeed ZeRO-3: 16-bit partitions beside the fp32 master
    }),
    "axolotl/gemma-lora-cce.yml": ("axolotl", {
        "activation_offload": False,  # axolotl default: AxolotlInputConfig.activation_offloading false
        "model": "google/gemma-2-2b", "method": "lora", "loss": "fused",
        "lora": {"rank": 16, "alpha": 32, "targets": ["q_proj", "v_proj"],
                 "dropout": 0.0},  # axolotl default: LoraConfig.lora_dropout 0.0
        "seq_len": 2048,
        "micro_batch": 4, "grad_accum": 1, "activation_checkpointing": "none", "attention": "eager",
        "compile": True, "optimizer": "adamw", "precision": "bf16", "steps": 500, "recipe": "axolotl",
    }),
    "torchtune/8B_lora_single_device.yaml": ("torchtune", {
        "model": "Llama-3.1-8B",  # torchtune.models.llama3_1.lora_llama3_1_8b
        "method": "lora", "lora": {"targets": "qv", "rank": 8, "alpha": 16, "dropout": 0.0},
        "seq_len": 2048, "micro_batch": 2, "optimizer": "adamw-fused", "loss": "chunked", "grad_accum": 8,
        "compile": False, "activation_checkpointing": "full", "activation_offload": False,
        "precision": "bf16", "recipe": "torchtune",
    }),
    "torchtune/8B_qlora_single_device.yaml": ("torchtune", {
        "model": "Llama-3.1-8B", "method": "qlora",
        "lora": {"targets": "all-linear", "rank": 16, "alpha": 32, "dropout": 0.0},  # q,k,v,output + MLP
        "seq_len": 4096, "micro_batch": 1, "grad_accum": 16, "optimizer": "adamw-fused", "loss": "chunked",
        "compile": True, "activation_checkpointing": "full", "activation_offload": True,
        "precision": "bf16", "recipe": "torchtune",
    }),
    "torchtune/8B_full.yaml": ("torchtune", {
        "model": "Llama-3.1-8B", "method": "full", "seq_len": 8192, "micro_batch": 2,
        "optimizer": "adamw-fused", "loss": "chunked", "compile": False, "optimizer_in_backward": False,
        "grad_accum": 1, "activation_checkpointing": "full", "activation_offload": False, "precision": "bf16",
        "gpus": 8, "zero_stage": 3,  # tune run --nproc_per_node 8 full_finetune_distributed
        "fsdp_wrap": "layers",  # custom_sharded_layers: ['tok_embeddings', 'output']
        "recipe": "torchtune",
    }),
    "torchtune/qwen2_5_3B_full_single_device.yaml": ("torchtune", {
        "model": "Qwen2.5-3B", "method": "full", "micro_batch": 2, "optimizer": "paged-adamw-8bit",
        "optimizer_in_backward": True, "loss": "chunked", "grad_accum": 1, "activation_checkpointing": "full",
        "activation_offload": False, "compile": False, "precision": "bf16", "recipe": "torchtune",
    }),  # max_seq_len: null sets nothing
    "torchtune/70B_lora.yaml": ("torchtune", {
        "model": "Llama-3.1-70B", "method": "lora",
        "lora": {"targets": ["q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj"],
                 "rank": 16, "alpha": 32, "dropout": 0.0},
        "seq_len": 4096, "micro_batch": 2, "grad_accum": 1, "optimizer": "adamw-fused",
        "loss": "chunked",  # LinearCrossEntropyLoss keeps each chunk's fp32 log-softmax
        "offload": "optimizer+params+grads",  # fsdp_cpu_offload: FSDP2 CPUOffloadPolicy
        "activation_checkpointing": "full", "activation_offload": False, "precision": "bf16",
        "gpus": 8, "zero_stage": 3, "recipe": "torchtune",
        "fsdp_wrap": "root",  # no custom_sharded_layers: embedding and output in the root group
    }),
    "torchtitan/llama3_8b.toml": ("torchtitan", {
        "context_parallel": 1,  # context_parallel_degree 1 (or its default): no split
        "data_parallel_replicate": 1,  # data_parallel_replicate_degree 1: one shard group
        "grad_accum": 1,  # torchtitan default: Training.global_batch_size -1, no accumulation
        "precision": "bf16-mixed",  # default mixed_precision_param bfloat16 under FSDP2
        "fsdp_reduce_dtype": "fp32",  # torchtitan default: Training.mixed_precision_reduce float32
        "model": "Llama-3.1-8B", "method": "full", "optimizer": "adamw-fused", "micro_batch": 1,
        "seq_len": 8192, "steps": 1000, "tensor_parallel": 1, "pipeline_parallel": 1, "zero_stage": 3,
        "gpus": 8,  # 1 replica x 8 shards x TP 1 x PP 1
        "compile": False, "activation_checkpointing": "op", "recipe": "torchtitan",
        "checkpoint_every": 0,  # line 43 [checkpoint] enable = false: no writes (read as one at the end)
    }),
    "torchtitan/llama3_70b.toml": ("torchtitan", {
        "context_parallel": 1,  # context_parallel_degree 1 (or its default): no split
        "data_parallel_replicate": 1,  # data_parallel_replicate_degree 1: one shard group
        "grad_accum": 1,  # torchtitan default: Training.global_batch_size -1, no accumulation
        "precision": "bf16-mixed",  # default mixed_precision_param bfloat16 under FSDP2
        "fsdp_reduce_dtype": "fp32",  # torchtitan default: Training.mixed_precision_reduce float32
        "model": "Llama-3.1-70B", "method": "full", "optimizer": "adamw-fused", "micro_batch": 8,
        "seq_len": 8192, "steps": 1000, "tensor_parallel": 8, "pipeline_parallel": 1, "zero_stage": 3,
        "sequence_parallel": True,  # apply_tp: SequenceParallel on every norm (parallelize.py)
        "gpus": 8,  # shard degree -1: at least TP x PP; the user gives --gpus
        "compile": True, "activation_checkpointing": "full", "recipe": "torchtitan",
    }),
    "torchtitan/llama3_405b_float8.toml": ("torchtitan", {
        "context_parallel": 1,  # context_parallel_degree 1 (or its default): no split
        "data_parallel_replicate": 1,  # data_parallel_replicate_degree 1: one shard group
        "fsdp_reduce_dtype": "fp32",  # torchtitan default: Training.mixed_precision_reduce float32
        "compile": False,  # torchtitan default: Compile.enable false
        "model": "Llama-3.1-405B", "method": "full", "precision": "fp8-torchao", "optimizer": "adamw-fused",
        "seq_len": 8192, "steps": 3000, "tensor_parallel": 8, "pipeline_parallel": 8,
        # pipeline_parallel.py:186-194: the local batch of 2 in micro-batches of
        # pipeline_parallel_microbatch_size (default 1)
        "micro_batch": 1,
        # Interleaved1F1B: 2 stages a rank (pipeline_parallel.py:114)
        "pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2,
        "sequence_parallel": True,  # apply_tp: SequenceParallel on every norm (parallelize.py)
        "gpus": 512, "activation_checkpointing": "op", "recipe": "torchtitan",
        "zero_stage": 2,  # reshard policy "default" under PP: layers kept gathered forward to backward
        "grad_accum": 128,  # global 1024 / (micro-batch 1 x 8 data-parallel shards)
    }),
    "torchtitan/llama3_8b_older.toml": ("torchtitan", {
        "context_parallel": 1,  # context_parallel_degree 1 (or its default): no split
        "data_parallel_replicate": 1,  # data_parallel_replicate_degree 1: one shard group
        "grad_accum": 1,  # torchtitan default: Training.global_batch_size -1, no accumulation
        "fsdp_reduce_dtype": "fp32",  # torchtitan default: Training.mixed_precision_reduce float32
        "model": "Llama-3.1-8B", "method": "full", "optimizer": "adamw-fused", "micro_batch": 4,
        "seq_len": 4096, "tensor_parallel": 2, "pipeline_parallel": 1, "zero_stage": 3, "gpus": 8,
        "sequence_parallel": True,  # apply_tp: SequenceParallel on every norm (parallelize.py)
        "compile": True, "precision": "bf16-mixed", "steps": 500,
        "activation_checkpointing": "full:2",  # selective, option "2": every 2nd block
        "recipe": "torchtitan",
    }),
    "torchtitan/llama3_8b_ddp.toml": ("torchtitan", {
        "context_parallel": 1,  # context_parallel_degree 1 (or its default): no split
        "data_parallel_replicate": 1,  # replicas without sharding are DDP's: no HSDP groups
        "precision": "amp-bf16",  # default bfloat16, autocast under DDP (maybe_enable_amp)
        "fsdp_reduce_dtype": "fp32",  # torchtitan default: Training.mixed_precision_reduce float32
        "compile": False,  # torchtitan default: Compile.enable false
        "model": "Llama-3.1-8B", "method": "full", "optimizer": "adamw",  # foreach
        "micro_batch": 2, "grad_accum": 1,  # global -1
        "seq_len": 2048, "tensor_parallel": 1, "pipeline_parallel": 1, "zero_stage": 0, "gpus": 4,
        "activation_checkpointing": "none", "recipe": "torchtitan",
    }),
    "llama-factory/llama3_lora_sft.yaml": ("llama-factory", {
        "stage": "sft",  # stage: sft
        "optimizer": "adamw-fused",  # Trainer default optim: adamw_torch_fused (torch 2.8+)
        "checkpoint_every": 500,  # line 23 save_steps: 500 (save_strategy steps by default)
        "activation_checkpointing": "full",  # default disable_gradient_checkpointing false
        "attention": "sdpa",  # default flash_attn auto: transformers' default, sdpa
        "model": "meta-llama/Llama-3.1-8B", "method": "lora",
        "lora": {"rank": 8, "targets": "all-linear", "alpha": 16,  # alpha: 2 x rank
                 "dropout": 0.0},  # LLaMA-Factory default: LoraArguments.lora_dropout 0.0
        "seq_len": 2048, "micro_batch": 1, "grad_accum": 8,
        "precision": "amp-bf16",  # trainable parameters upcast to fp32
        "recipe": "llama-factory",
    }),
    "llama-factory/llama3_qlora_bnb.yaml": ("llama-factory", {
        "stage": "sft",  # stage: sft
        "optimizer": "adamw-fused",  # Trainer default optim: adamw_torch_fused (torch 2.8+)
        "activation_checkpointing": "full",  # default disable_gradient_checkpointing false
        "model": "meta-llama/Llama-3.1-8B", "base_weights": "nf4", "method": "qlora",
        "lora": {"rank": 16, "targets": "all-linear", "alpha": 32,
                 "dropout": 0.0},  # LLaMA-Factory default: LoraArguments.lora_dropout 0.0
        "seq_len": 4096, "micro_batch": 2,
        "grad_accum": 4, "precision": "amp-bf16", "attention": "flash", "recipe": "llama-factory",
    }),
    "llama-factory/qwen_full_ds3.yaml": ("llama-factory", {
        "stage": "sft",  # stage: sft
        "optimizer": "adamw-fused",  # Trainer default optim: adamw_torch_fused (torch 2.8+)
        "activation_checkpointing": "full",  # default disable_gradient_checkpointing false
        "attention": "sdpa",  # default flash_attn auto: transformers' default, sdpa
        "model": "Qwen/Qwen2.5-7B", "method": "full", "seq_len": 2048, "micro_batch": 1, "grad_accum": 2,
        "precision": "bf16-mixed",  # bf16 under DeepSpeed ZeRO-3
        "loss": "fused", "kernels": "liger", "zero_stage": 3, "recipe": "llama-factory",
        "zero3_master": "separate",  # DeepSpeed ZeRO-3
    }),
    "llama-factory/qwen_lora_unsloth.yaml": ("llama-factory", {
        "stage": "sft",  # stage: sft
        "activation_checkpointing": "full",  # default disable_gradient_checkpointing false
        "model": "Qwen/Qwen2.5-7B", "method": "lora",
        "lora": {"rank": 32, "alpha": 16, "dropout": 0.05, "targets": "q_proj,v_proj"},
        "recipe": "unsloth",  # use_unsloth
        "activation_offload": True, "seq_len": 4096, "micro_batch": 4, "grad_accum": 4,
        "optimizer": "adamw-8bit", "precision": "amp-bf16",
    }),
    "llama-factory/llama3_lora_dpo.yaml": ("llama-factory", {
        # stage: dpo, pref_loss: sigmoid: DPO; CustomDPOTrainer.concatenated_forward takes the full
        # fp32 logits' log-softmax (loss logsoftmax); a LoRA policy without ref_model disables its
        # adapters (train/trainer_utils.py create_ref_model returns None for lora)
        "stage": "dpo", "loss": "logsoftmax", "reference": "adapter",
        "optimizer": "adamw-fused",  # Trainer default optim: adamw_torch_fused (torch 2.8+)
        "attention": "sdpa",  # default flash_attn auto: transformers' default, sdpa
        "model": "meta-llama/Llama-3.2-3B", "method": "lora",
        "lora": {"targets": "all-linear", "alpha": 16, "rank": 8,  # rank 8 and alpha 16 by default
                 "dropout": 0.0},  # LLaMA-Factory default: LoraArguments.lora_dropout 0.0
        "seq_len": 2048, "micro_batch": 1, "grad_accum": 8, "steps": 1000,
        "precision": "bf16",  # pure_bf16
        "activation_checkpointing": "none", "recipe": "llama-factory",
    }),
    # LLaMA-Factory's own examples (examples/train_lora/ at ff6d4d12), read from its source at
    # that commit: hparams/finetuning_args.py (stage, pref_loss sigmoid -> DPO; use_ref_model),
    # train/trainer_utils.py create_ref_model (None for a LoRA policy: its adapters are disabled,
    # dpo/trainer.py and kto/trainer.py), dpo/trainer.py concatenated_forward (full fp32 logits:
    # the standard loss), rm/workflow.py (a value head on the causal LM: stage rm)
    **{
        f"llama-factory/qwen3_lora_{name}.yaml": ("llama-factory", {
            "model": "Qwen3-4B",  # Qwen/Qwen3-4B-Instruct-2507: the catalog's Qwen3-4B shapes
            "method": "lora", "stage": stage,
            "lora": {"rank": 8, "targets": "all-linear", "dropout": 0.0, "alpha": 16},  # alpha 2 x rank
            "seq_len": 2048, "checkpoint_every": 500, "micro_batch": 1, "grad_accum": 8,
            "precision": "amp-bf16",  # bf16: true, not pure_bf16: trainable parameters in fp32
            "optimizer": "adamw-fused", "activation_checkpointing": "full", "attention": "sdpa",
            "recipe": "llama-factory",
            **({"reference": "adapter", "loss": "logsoftmax" if stage == "dpo" else "standard"}
               if stage != "rm" else {}),
        })
        for name, stage in (("dpo", "dpo"), ("kto", "kto"), ("reward", "rm"))
    },
    # axolotl's own examples at 067b021c, read from its source there: rl (utils/schemas/enums.py
    # RLType; core/builders/rl.py picks TRL's trainer), the reference (train.py
    # setup_reference_model: an adapter without rl_adapter_ref_model passes none, so TRL disables
    # the adapters; a full fine-tune loads the model again), reward_model (core/builders/causal.py:
    # TRL's RewardTrainer); micro_batch_size counts pairs (TRL's per_device_train_batch_size)
    "axolotl/qwen2-dpo.yaml": ("axolotl", {
        "model": "Qwen/Qwen2.5-0.5B", "stage": "dpo", "reference": "model",  # rl: dpo, no adapter
        "loss": "selective",  # TRL 1.8 (axolotl's pin): the full logits through selective_log_softmax
        "method": "full", "seq_len": 2048, "grad_accum": 4, "micro_batch": 2,
        "optimizer": "adamw-8bit",  # adamw_bnb_8bit
        "precision": "bf16",  # bf16: auto loads the weights in bf16: no fp32 master
        "activation_checkpointing": "full", "attention": "flash", "activation_offload": False,
        "recipe": "axolotl",
    }),
    "axolotl/qwen2-reward-model.yaml": ("axolotl", {
        "model": "Qwen/Qwen2.5-0.5B", "stage": "rm",  # reward_model: true
        "method": "full", "seq_len": 2048, "grad_accum": 4, "micro_batch": 2, "optimizer": "adamw-8bit",
        "precision": "bf16", "activation_checkpointing": "full", "attention": "flash",
        "activation_offload": False, "recipe": "axolotl",
    }),
    "axolotl/llama-3-qlora-1b-kto.yaml": ("axolotl", {
        "model": "meta-llama/Llama-3.2-1B", "stage": "kto", "reference": "adapter",  # rl: kto, adapter qlora
        "loss": "selective",  # TRL 1.8's KTO: the full logits through selective_log_softmax
        "method": "qlora", "base_weights": "nf4",  # load_in_4bit: true
        "lora": {"rank": 32, "alpha": 64, "dropout": 0.05, "targets": "all-linear"},
        "seq_len": 2048, "grad_accum": 1, "micro_batch": 2, "optimizer": "adamw-8bit",  # adamw_8bit
        "precision": "bf16", "activation_checkpointing": "full", "attention": "flash",
        "activation_offload": False, "recipe": "axolotl",
    }),
    # GRPO: axolotl's own example (rl: grpo with its trl: section, core/trainers/grpo/__init__.py
    # set_training_args_kwargs) and the TRL docs' multi-node GRPOConfig (trl/trainer/grpo_config.py)
    "axolotl/qwen-grpo-sudoku.yaml": ("axolotl", {
        # the -Instruct model has the catalog's Qwen2.5-1.5B shapes; rl: grpo, trl.beta unset: TRL's 0
        "model": "Qwen2.5-1.5B", "stage": "grpo",
        "generations": 8, "completion_len": 2048,  # trl.num_generations, trl.max_completion_length
        "rollout_engine": "hf",  # trl.use_vllm: false
        "loss": "selective",  # TRL 1.8 (axolotl's pin): the completion's full logits
        "method": "full", "seq_len": 4096, "grad_accum": 64, "micro_batch": 1, "steps": 100,
        "checkpoint_every": 100, "optimizer": "adamw-8bit",  # adamw_8bit
        "precision": "bf16", "activation_checkpointing": "none",  # axolotl's default: off
        "attention": "sdpa", "activation_offload": False, "recipe": "axolotl",
    }),
    "hf/trl_sft_lora.yaml": ("hf", {
        "stage": "sft",  # run with `trl sft` (its comment line)
        "model": "Qwen/Qwen2.5-0.5B", "seq_len": 1024, "micro_batch": 8, "grad_accum": 2,
        "activation_checkpointing": "full", "precision": "amp-bf16",  # fp32 weights by default
        "optimizer": "adamw-fused", "method": "lora",
        "lora": {"rank": 16, "alpha": 32, "targets": "all-linear",
                 "dropout": 0.05},  # TRL default: ModelConfig.lora_dropout 0.05
        "activation_offload": False,  # TRL default: SFTConfig.activation_offloading false
        "recipe": "trl",
    }),
    "hf/training_args.json": ("hf", {
        "micro_batch": 4, "grad_accum": 8, "optimizer": "adafactor",
        "checkpoint_every": 0,  # line 9 save_strategy "epoch": one write at each epoch's end
        "precision": "fp16-mixed",  # fp16 under DeepSpeed (fp16 auto)
        "zero_stage": 2, "recipe": "hf-trainer",
        "activation_checkpointing": "none",  # Trainer default: gradient_checkpointing false
    }),
    "hf/trl_qlora.yaml": ("hf", {
        "model": "meta-llama/Llama-3.1-8B", "attention": "flash", "method": "qlora", "base_weights": "nf4",
        "lora": {"rank": 64, "alpha": 16, "dropout": 0.1,
                 "targets": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]},
        "seq_len": 2048, "micro_batch": 4, "grad_accum": 4, "activation_checkpointing": "full",
        "optimizer": "paged-adamw-8bit",
        "precision": "bf16",  # bf16 over a model loaded in bfloat16
        "activation_offload": True, "recipe": "trl",
        "loss": "standard",  # max_seq_length: a TRL 0.19 config, before the chunked loss
    }),
    "hf/fsdp_args.yaml": ("hf", {
        "micro_batch": 2, "grad_accum": 4, "zero_stage": 3,
        "precision": "bf16-mixed",  # bf16 under accelerate's FSDP: an fp32 master, bf16 compute
        "activation_checkpointing": "full",  # fsdp_config.activation_checkpointing
        "steps": 2000, "loss": "fused", "kernels": "liger", "compile": True, "optimizer": "adamw",
        "recipe": "hf-trainer",
    }),
    "hf/sft_fp32.json": ("hf", {
        "seq_len": 4096, "micro_batch": 1, "grad_accum": 16, "activation_checkpointing": "none",
        "precision": "fp32",  # neither bf16 nor fp16
        "optimizer": "sgd", "recipe": "trl",
        "method": "full",  # TRL default: ModelConfig.use_peft false, the full model
        "activation_offload": False,  # TRL default: SFTConfig.activation_offloading false
        "loss": "standard",  # max_seq_length: a TRL 0.19 config, before the chunked loss
    }),
    "accelerate/fsdp_full_shard.yaml": ("accelerate", {
        "zero_stage": 3, "activation_checkpointing": "full", "precision": "bf16-mixed", "gpus": 8,
        "fsdp_wrap": "root",  # FSDP1: embedding, final norm and head in the root unit
    }),
    "accelerate/deepspeed_zero2_offload.yaml": ("accelerate", {
        "grad_accum": 4, "offload": "optimizer", "zero_stage": 2, "precision": "bf16-mixed", "gpus": 4,
    }),
    "accelerate/multi_gpu_fp16.yaml": ("accelerate", {"zero_stage": 0, "precision": "amp-fp16", "gpus": 2}),
    "accelerate/fsdp2_two_nodes.yaml": ("accelerate", {
        "zero_stage": 2,  # reshard_after_forward false
        "precision": "bf16-mixed", "gpus_per_node": 8, "gpus": 16,
        "fsdp_wrap": "layers",  # accelerate's FSDP2 carves out the embedding and the head
    }),
    "accelerate/deepspeed_file.yaml": ("accelerate", {
        "compile": True, "gpus": 8, "precision": "bf16-mixed", "zero_stage": 3, "offload": "optimizer+params",
        "grad_accum": 2, "micro_batch": 1, "recipe": "deepspeed",  # from ds_z3_offload.json
        "zero3_master": "separate",  # DeepSpeed ZeRO-3
    }),
    "deepspeed/zero2.json": ("deepspeed", {
        "micro_batch": 4, "grad_accum": 8, "optimizer": "adamw-fused", "precision": "bf16-mixed",
        "zero_stage": 2, "recipe": "deepspeed",
    }),
    "deepspeed/zero3_offload_fp16.json": ("deepspeed", {
        "precision": "fp16-mixed", "zero_stage": 3, "offload": "optimizer+params", "recipe": "deepspeed",
        "zero3_master": "separate",  # DeepSpeed ZeRO-3
    }),
    "deepspeed/zero1_global_batch.json": ("deepspeed", {
        "micro_batch": 2, "precision": "bf16-mixed", "zero_stage": 1, "optimizer": "adamw-fused",
        "recipe": "deepspeed", "grad_accum": 32,  # 64 / (2 x 1 GPU)
    }),
    "deepspeed/zero3_nvme.json": ("deepspeed", {
        "zero_stage": 3, "offload": "optimizer+params", "precision": "bf16-mixed", "micro_batch": 1,
        "grad_accum": 16, "recipe": "deepspeed", "zero3_master": "separate",
    }),
    "deepspeed/zero0_consistent.json": ("deepspeed", {
        "micro_batch": 4, "grad_accum": 8, "zero_stage": 0, "recipe": "deepspeed",
        "precision": "fp32",  # both blocks enabled false: DeepSpeed's fp32
    }),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_reads_as_written_down(name: str) -> None:
    kind, expected = EXPECTED[name]
    reading = scenario_from_config([FIXTURES / name])
    assert reading.files[0][1] == kind
    assert reading.mapping == expected
    scenario_from_mapping(reading.mapping)  # and it is a valid scenario


def test_five_fixtures_per_framework() -> None:
    for kind in ("axolotl", "torchtune", "torchtitan", "llama-factory", "hf", "accelerate", "deepspeed"):
        assert sum(value[0] == kind for value in EXPECTED.values()) >= 5, kind


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_nothing_is_dropped_silently(name: str) -> None:
    """Every setting of every file read is either behind a field or in the ignored list."""
    reading = scenario_from_config([FIXTURES / name])
    for file, _ in reading.files:
        if "(" in file:
            continue  # an inline block, listed under its parent's setting
        data = parse_any(Path(file).read_text(), file, FIELD)
        used = {s.setting.split(" ", 1)[1] for s in reading.provenance if s.file == file and " " in s.setting}
        skipped = {s.setting for s in reading.ignored if s.file == file}
        for path in flatten(data):
            assert path in used or path in skipped, f"{file}: {path}"


def test_provenance_names_the_setting_and_its_unit() -> None:
    reading = scenario_from_config([FIXTURES / "axolotl/llama3-lora-8b.yml"])
    lines = [str(source) for source in reading.provenance]
    assert "micro_batch = 2 (axolotl micro_batch_size, per GPU)" in lines
    # a field the file leaves out: the recipe's default where it has one, else trainplan's
    assert "loss = standard (axolotl recipe default)" in lines
    assert "gpus = 1 (trainplan default)" in lines
    ignored = {str(skipped) for skipped in reading.ignored}
    assert "learning_rate (irrelevant to memory and time)" in ignored
    assert "tf32 (not modelled yet: TF32 matmuls for fp32 work)" in ignored
    assert (
        "num_epochs (not modelled yet: trainplan does not read the dataset; give dataset_tokens)" in ignored
    )
    deepspeed = scenario_from_config([FIXTURES / "deepspeed/zero2.json"])
    assert "activation_checkpointing = none (deepspeed recipe default)" in [
        str(s) for s in deepspeed.provenance
    ]


def test_unknown_settings_are_listed() -> None:
    reading = read_configs(
        [("a.yml", "base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 1\nfancy_new_knob: 3\n")],
        upload_resolver({}),
    )
    assert [(s.setting, s.reason) for s in reading.ignored] == [("fancy_new_knob", "unknown")]


def test_flags_override_the_file() -> None:
    reading = scenario_from_config(
        [FIXTURES / "axolotl/llama3-lora-8b.yml"], {"micro_batch": 8, "lora": {"rank": 4}}
    )
    assert reading.mapping["micro_batch"] == 8
    assert reading.mapping["lora"] == {"rank": 4, "alpha": 16, "dropout": 0.05, "targets": "all-linear"}
    lines = [str(source) for source in reading.provenance]
    assert "micro_batch = 8 (given: flag or scenario file)" in lines
    assert not any(line.startswith("micro_batch = 2") for line in lines)


def test_global_batch_is_divided_by_the_data_parallel_gpus() -> None:
    path = FIXTURES / "deepspeed/zero1_global_batch.json"
    # train_batch_size 64 = micro 2 x accumulation x 8 GPUs -> 4
    assert scenario_from_config([path], {"gpus": 8}).mapping["grad_accum"] == 4
    note = next(s for s in scenario_from_config([path], {"gpus": 8}).provenance if s.field == "grad_accum")
    assert "global 64" in note.note and "8 data-parallel GPUs" in note.note
    with pytest.raises(InputError, match="disagrees with grad_accum 3"):
        scenario_from_config([path], {"gpus": 8, "grad_accum": 3})
    with pytest.raises(InputError, match="not a multiple"):
        scenario_from_config([path], {"gpus": 6})


def test_contradictory_files_name_both_settings(tmp_path: Path) -> None:
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "ax.yml").write_text(
        "base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 2\nfsdp: [full_shard]\n"
    )
    with pytest.raises(InputError) as error:
        scenario_from_config([tmp_path / "ax.yml", tmp_path / "ds.json"])
    assert "DeepSpeed" in error.value.message and "FSDP" in error.value.message
    assert "zero_optimization.stage" in error.value.message and "axolotl fsdp" in error.value.message
    (tmp_path / "ds2.json").write_text('{"train_micro_batch_size_per_gpu": 4}')
    with pytest.raises(InputError) as error:
        scenario_from_config([tmp_path / "ax.yml", tmp_path / "ds2.json"])
    assert "axolotl micro_batch_size = 2" in error.value.message
    assert "deepspeed train_micro_batch_size_per_gpu = 4" in error.value.message


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("bad.yaml", "base_model: x\nmicro_batch_size: [1\n", "line"),
        ("bad.toml", "[training]\nlocal_batch_size = = 2\n", "line 2"),
        ("bad.json", '{"zero_optimization": {"stage": 3,}}', "line 1"),
    ],
)
def test_parse_errors_name_the_file_and_line(tmp_path: Path, name: str, text: str, where: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as error:
        scenario_from_config([tmp_path / name])
    assert name in error.value.message and where in error.value.message


def test_unknown_format_names_the_formats_we_read(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("hello: world\n")
    with pytest.raises(InputError) as error:
        scenario_from_config([tmp_path / "x.yaml"])
    for title in (
        "axolotl YAML",
        "torchtune",
        "torchtitan TOML",
        "LLaMA-Factory",
        "TRL SFTConfig",
        "accelerate",
        "DeepSpeed JSON",
    ):
        assert title in error.value.message


def test_format_is_detected_from_the_content(tmp_path: Path) -> None:
    for source, target in (("torchtitan/llama3_8b.toml", "job"), ("axolotl/gemma-lora-cce.yml", "run.cfg")):
        (tmp_path / target).write_text((FIXTURES / source).read_text())
        assert scenario_from_config([tmp_path / target]).mapping == EXPECTED[source][1]


def test_no_code_is_evaluated(tmp_path: Path) -> None:
    (tmp_path / "evil.yml").write_text("base_model: !!python/object/apply:os.system ['echo hi']\n")
    with pytest.raises(InputError, match="not valid YAML"):
        scenario_from_config([tmp_path / "evil.yml"])


def test_references_stay_inside_the_first_files_folder(tmp_path: Path) -> None:
    inner = tmp_path / "run"
    inner.mkdir()
    (tmp_path / "secret.json").write_text('{"zero_optimization": {"stage": 3}}')
    (inner / "ax.yml").write_text(
        "base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 1\ndeepspeed: ../secret.json\n"
    )
    with pytest.raises(InputError, match="outside the folder"):
        scenario_from_config([inner / "ax.yml"])
    (inner / "ax.yml").write_text(
        f"base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 1\ndeepspeed: {tmp_path / 'secret.json'}\n"
    )
    with pytest.raises(InputError, match="outside the folder"):
        scenario_from_config([inner / "ax.yml"])
    (inner / "ax.yml").write_text(
        "base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 1\ndeepspeed: missing.json\n"
    )
    with pytest.raises(InputError, match="not found"):
        scenario_from_config([inner / "ax.yml"])


def test_uploads_resolve_references_among_themselves() -> None:
    ax = (FIXTURES / "axolotl/mistral-full-zero3.yml").read_text()
    ds = (FIXTURES / "axolotl/deepspeed_configs/zero3_bf16.json").read_text()
    files = {"mistral.yml": ax, "zero3_bf16.json": ds}
    reading = read_configs(list(files.items()), upload_resolver(files))
    assert reading.mapping == EXPECTED["axolotl/mistral-full-zero3.yml"][1]
    with pytest.raises(InputError, match="drop that file too"):
        read_configs([("mistral.yml", ax)], upload_resolver({"mistral.yml": ax}))


def test_bad_values_name_the_setting_and_file(tmp_path: Path) -> None:
    (tmp_path / "ax.yml").write_text("base_model: Qwen/Qwen2.5-0.5B\nmicro_batch_size: 0\n")
    with pytest.raises(InputError) as error:
        scenario_from_config([tmp_path / "ax.yml"])
    assert error.value.field == "micro_batch_size" and "ax.yml" in error.value.message
    (tmp_path / "lf.yaml").write_text("finetuning_type: freeze\ncutoff_len: 1024\n")
    with pytest.raises(InputError, match="freeze is not modelled yet"):
        scenario_from_config([tmp_path / "lf.yaml"])


def test_unreachable_hub_model_asks_for_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import trainplan.inputs.resolve

    def offline(hub_id: str) -> dict[str, Any]:
        raise InputError("model", f"could not fetch config.json of {hub_id!r} from the Hub")

    monkeypatch.setattr(trainplan.inputs.resolve, "fetch_hub_config", offline)
    (tmp_path / "ax.yml").write_text("base_model: acme/secret-model\nmicro_batch_size: 1\n")
    with pytest.raises(InputError) as error:
        scenario_from_config([tmp_path / "ax.yml"])
    assert "acme/secret-model" in error.value.message and "--model" in error.value.message
    assert "ax.yml" in error.value.message
    reading = scenario_from_config([tmp_path / "ax.yml"], {"model": "Qwen2.5-0.5B"})
    assert reading.mapping["model"] == "Qwen2.5-0.5B"


def test_torchtune_builder_outside_the_catalog_asks_for_model(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "model:\n  _component_: torchtune.models.code_llama2.code_llama2_7b\nbatch_size: 1\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n"
    )
    with pytest.raises(InputError, match=r"code_llama2_7b.*--model"):
        scenario_from_config([tmp_path / "c.yaml"])


def test_public_api() -> None:
    import trainplan

    reading = trainplan.scenario_from_config([FIXTURES / "deepspeed/zero2.json"])
    mapping, provenance, ignored, files = reading
    assert isinstance(reading, trainplan.ConfigReading) and files == [
        (str(FIXTURES / "deepspeed/zero2.json"), "deepspeed")
    ]
    assert trainplan.scenario_from_mapping(mapping).zero_stage == 2 and provenance and ignored
    assert {"scenario_from_config", "ConfigReading"} <= set(trainplan.__all__)


@pytest.mark.parametrize(
    ("text", "every"),
    [
        # transformers 5.24 TrainingArguments: save_strategy "steps", save_steps 500 by default
        ("save_steps: 250\n", 250),
        ("save_strategy: steps\nsave_steps: 0.1\nmax_steps: 1000\n", 100),  # a share of max_steps
        ("save_strategy: epoch\nsave_steps: 250\n", 0),  # each epoch's end; save_steps unread
        ('save_strategy: "no"\n', 0),  # no saves within training: the final save only
        ("save_strategy: steps\n", None),  # the default interval (500)
    ],
)
def test_checkpoint_writes_are_read_as_the_trainer_saves(
    tmp_path: Path, text: str, every: int | None
) -> None:
    path = tmp_path / "trl.yaml"
    path.write_text("model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 2\n" + text)
    assert scenario_from_config([path]).mapping.get("checkpoint_every") == every


def test_a_bad_save_setting_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "trl.yaml"
    path.write_text(
        "model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 2\nsave_strategy: hourly\n"
    )
    with pytest.raises(InputError, match="save_strategy"):
        scenario_from_config([path])


def test_torchtitan_checkpoint_interval_is_read_when_enabled(tmp_path: Path) -> None:
    """[checkpoint] enable true with interval 100: a write every 100 steps (JobConfig's default
    interval is 500); off, the reading keeps one write at the end."""
    source = (FIXTURES / "torchtitan/llama3_8b.toml").read_text()
    on = tmp_path / "on.toml"
    on.write_text(
        source.replace("enable = false\nfolder", "enable = true\nfolder").replace(
            "interval = 500", "interval = 100"
        )
    )
    assert scenario_from_config([on]).mapping["checkpoint_every"] == 100
    assert scenario_from_config([FIXTURES / "torchtitan/llama3_8b.toml"]).mapping["checkpoint_every"] == 0


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        # pref_loss orpo or simpo: FinetuningArguments.use_ref_model is false; stages of their own
        ("stage: dpo\npref_loss: orpo\n", {"stage": "orpo", "loss": "logsoftmax"}),
        ("stage: dpo\npref_loss: simpo\n", {"stage": "simpo", "loss": "logsoftmax"}),
        # a full fine-tune loads the model again, frozen at the compute dtype (no fp32 upcast)
        (
            "stage: dpo\nfinetuning_type: full\nbf16: true\n",
            {"reference": "model", "reference_weights": "bf16"},
        ),
        # a named reference model, quantised by ref_model_quantization_bit
        (
            "stage: kto\nref_model: x/y\nref_model_quantization_bit: 4\n",
            {"reference": "model", "reference_weights": "nf4"},
        ),
        # Liger's fused loss does not run: the preference trainers call the model without labels
        ("stage: dpo\nenable_liger_kernel: true\n", {"loss": "logsoftmax", "kernels": "liger"}),
    ],
)
def test_llama_factory_stages(tmp_path: Path, settings: str, expected: dict[str, Any]) -> None:
    path = tmp_path / "train.yaml"
    path.write_text("model_name_or_path: meta-llama/Llama-3.1-8B\ntemplate: llama3\n" + settings)
    mapping = scenario_from_config([path]).mapping
    assert {key: mapping.get(key) for key in expected} == expected
    if mapping["stage"] in ("orpo", "simpo"):
        assert "reference" not in mapping
    scenario_from_mapping(mapping)  # the stage's rules accept what was read


def test_llama_factory_ppo_is_named_as_not_modelled(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text("model_name_or_path: meta-llama/Llama-3.1-8B\ntemplate: llama3\nstage: ppo\n")
    reading = scenario_from_config([path])
    assert "stage" not in reading.mapping
    # train/ppo/workflow.py at ff6d4d12: load_model(..., add_valuehead=True), a value head on the
    # policy's own backbone, unlike TRL's PPOTrainer that stage ppo models
    assert any("value head on the policy's own backbone" in str(skipped) for skipped in reading.ignored)


@pytest.mark.parametrize(
    ("settings", "reference"),
    [
        # pydantic (axolotl) and HfArgumentParser (LLaMA-Factory) read "true"/"false" strings as
        # booleans: a string "false" is off, not a non-empty value
        ("rl: dpo\nadapter: lora\nrl_adapter_ref_model: 'false'\n", "adapter"),
        ("rl: dpo\nadapter: lora\nrl_adapter_ref_model: 'true'\n", "model"),
        ("rl: dpo\nprecompute_ref_log_probs: 'true'\n", "precomputed"),
    ],
)
def test_axolotl_reference_switches_read_string_booleans(
    tmp_path: Path, settings: str, reference: str
) -> None:
    path = tmp_path / "dpo.yml"
    path.write_text(
        "base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 1\nsequence_len: 1024\n" + settings
    )
    assert scenario_from_config([path]).mapping["reference"] == reference


def test_llama_factory_full_dpo_reference_reads_a_string_boolean(tmp_path: Path) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(
        "model_name_or_path: meta-llama/Llama-3.1-8B\ntemplate: llama3\nstage: dpo\n"
        "finetuning_type: full\nbf16: 'true'\n"
    )
    assert scenario_from_config([path]).mapping["reference_weights"] == "bf16"
