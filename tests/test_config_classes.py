"""Real configs read the way their framework reads them, one class of misreading per test.

Each input is an excerpt of a file from the framework's own repository (the settings that decide
the fields checked; the rest of the file is data, logging and schedule), cited by repository,
path and commit. Each expected value is derived from the framework's source at the commit that
data/framework_defaults.yaml records, and the comment names the line that decides it: the
expectations are the framework's, not the reader's. tests/test_config_corpus.py reads the whole
files where the corpus is present.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainplan.inputs.configs import ConfigReading, scenario_from_config
from trainplan.inputs.configs.base import Default, declared, framework_defaults
from trainplan.specs.errors import InputError
from trainplan.specs.scenario import scenario_from_mapping

AXOLOTL = "axolotl-ai-cloud/axolotl@067b021c8b87a9e5e380b9173c704cf7340e30f5"
TORCHTUNE = "pytorch/torchtune@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1"
TORCHTITAN = "pytorch/torchtitan@238fa9953e4aec2a62582121564273d7cbb1e9f1"
HANDBOOK = "huggingface/alignment-handbook@925acdfe4b2b4e38c3dabd1851bc418f0b656351"
TRL = "huggingface/trl@f2cd57710ae345ea6428ae95363267fcf38a3dc8"
ACCELERATE = "huggingface/accelerate@16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
DS_EXAMPLES = "deepspeedai/DeepSpeedExamples@45b4b7156c8794a3452a5a7d03dbd8d797068569"
LLAMA_FACTORY = "hiyouga/LLaMA-Factory@ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30"


def read(tmp_path: Path, name: str, text: str, **others: str) -> ConfigReading:
    """The reading of `text` saved as `name` (and `others` beside it), from its folder."""
    for other, content in {name: text, **others}.items():
        path = tmp_path / other
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return scenario_from_config([tmp_path / name])


def source(reading: ConfigReading, field: str) -> Any:
    return next(item for item in reading.provenance if item.field == field)


def test_an_empty_key_is_unset_and_no_adapter_is_a_full_fine_tune(tmp_path: Path) -> None:
    # AXOLOTL examples/eaft/eaft-example.yml, lines 1, 13-14, 36, 46, 56-57, 60
    text = (
        "base_model: google/gemma-3-1b-it\nload_in_8bit: false\nload_in_4bit: false\nadapter:\n"
        "micro_batch_size: 1\nbf16: auto\nfp16:\ngradient_checkpointing: true\n"
    )
    reading = read(tmp_path, "eaft-example.yml", text)
    # `fp16:` and `adapter:` are None, as pydantic reads them: unset, and no adapter trains the
    # whole model (the reader's implied rule; LoraConfig.adapter default None)
    assert reading.mapping["method"] == "full"
    # bf16 auto: true on a GPU with bf16 (utils/config/__init__.py resolve_dtype); the model is
    # loaded in bf16, so the Trainer steps bf16 weights and states
    assert reading.mapping["precision"] == "bf16"
    assert {(item.setting, item.reason) for item in reading.ignored} >= {
        ("fp16", "empty: unset, the framework's default applies"),
        ("adapter", "empty: unset, the framework's default applies"),
    }
    # google/gemma-3-1b-it has the shapes of the catalog's Gemma-3-1B (models.yaml same_shapes)
    assert reading.mapping["model"] == "Gemma-3-1B"
    assert "google/gemma-3-1b-it has its shapes" in source(reading, "model").note
    scenario_from_mapping(reading.mapping)


def test_axolotl_defaults_come_from_its_schema(tmp_path: Path) -> None:
    # AXOLOTL examples/llama-3/qlora-1b-kto.yaml, lines 1, 6, 22: no gradient_checkpointing, no
    # attention setting, no optimizer, no micro_batch_size
    reading = read(
        tmp_path, "kto.yaml", "base_model: meta-llama/Llama-3.2-1B\nload_in_4bit: true\nadapter: qlora\n"
    )
    mapping = reading.mapping
    assert mapping["activation_checkpointing"] == "none"  # schemas/config.py:600 default False
    assert mapping["optimizer"] == "adamw-fused"  # schemas/training.py:122 adamw_torch_fused
    assert mapping["micro_batch"] == 1 and mapping["grad_accum"] == 1  # training.py:77, :71
    assert mapping["seq_len"] == 512  # schemas/config.py:665 sequence_len 512
    assert mapping["attention"] == "sdpa"  # attn_implementation None: transformers' default
    assert mapping["lora"]["dropout"] == 0.0  # schemas/peft.py:80
    note = source(reading, "activation_checkpointing").note
    assert note.startswith("axolotl 0.18.0 default (AxolotlInputConfig.gradient_checkpointing")
    assert (
        source(reading, "activation_checkpointing").setting == "axolotl default gradient_checkpointing: False"
    )


def test_the_cut_cross_entropy_plugin_is_a_fused_loss(tmp_path: Path) -> None:
    # AXOLOTL examples/distributed-parallel/llama-3_1-8b-hsdp-tp.yaml, lines 1-9, 15-22, 30-38
    text = (
        "base_model: meta-llama/Llama-3.1-8B\nplugins:\n"
        "  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n"
        "dp_shard_size: 4\ndp_replicate_size: 2\ntensor_parallel_size: 2\n"
        "fsdp_version: 2\nfsdp_config:\n  offload_params: false\n  reshard_after_forward: true\n"
        "sequence_len: 2048\nattn_implementation: flash_attention_2\ngradient_accumulation_steps: 1\n"
        "micro_batch_size: 1\noptimizer: adamw_torch_fused\nbf16: true\n"
    )
    reading = read(tmp_path, "hsdp-tp.yaml", text)
    mapping = reading.mapping
    # integrations/cut_cross_entropy/args.py:33 cut_cross_entropy defaults to True with the plugin
    assert mapping["loss"] == "fused"
    assert mapping["attention"] == "flash"  # attn_implementation flash_attention_2
    assert mapping["tensor_parallel"] == 2 and mapping["gpus"] == 16  # 4 x 2 x 2
    assert mapping["zero_stage"] == 3  # reshard_after_forward: true
    # utils/distributed.py _get_parallel_config_kwargs: dp_replicate_size 2 under FSDP is HSDP's
    # replicas; FSDP2 shards within each of the 2 groups of dp_shard_size 4
    assert mapping["data_parallel_replicate"] == 2
    assert scenario_from_mapping(mapping).data_parallel_replicate == 2
    # cut_cross_entropy: false turns it off again
    off = read(tmp_path, "off.yaml", text + "cut_cross_entropy: false\n")
    assert "loss" not in off.mapping and scenario_from_mapping(off.mapping).loss == "standard"


@pytest.mark.parametrize("value", ["legacy", "disk", "hidden_states", "true"])
def test_every_activation_offloading_value_axolotl_takes(tmp_path: Path, value: str) -> None:
    # AXOLOTL examples/alst/llama3-8b-deepspeed-alst.yaml, lines 1, 37-38; the values are
    # schemas/config.py:623 Literal["legacy", "disk", "hidden_states"] | bool
    text = (
        f"base_model: meta-llama/Llama-3.1-8B\ngradient_checkpointing: true\nactivation_offloading: {value}\n"
    )
    reading = read(tmp_path, "alst.yaml", text)
    assert reading.mapping["activation_offload"] is True
    assert reading.mapping["activation_checkpointing"] == "full"


def test_fsdp_checkpointing_wins_over_a_false_gradient_checkpointing(tmp_path: Path) -> None:
    # AXOLOTL examples/archived/dbrx/16bit-lora.yaml, lines 1, 24, 50, 65, 74
    text = (
        "base_model: meta-llama/Llama-3.1-8B\nadapter: lora\n"
        "gradient_checkpointing: false  # don't use with fsdp_activation_checkpointing\n"
        "fsdp:\n  - full_shard\n  - auto_wrap\nfsdp_config:\n  fsdp_activation_checkpointing: true\n"
    )
    assert read(tmp_path, "dbrx.yaml", text).mapping["activation_checkpointing"] == "full"


def test_axolotl_and_transformers_optimizer_names(tmp_path: Path) -> None:
    # AXOLOTL examples/qwen3/32b-qlora.yaml sets optimizer: adamw_torch_4bit (transformers
    # OptimizerNames: torchao's AdamW4bit); schemas/enums.py ao_adamw_4bit is axolotl's own name
    for name in ("adamw_torch_4bit", "ao_adamw_4bit"):
        reading = read(tmp_path, f"{name}.yaml", f"base_model: Qwen/Qwen3-32B\noptimizer: {name}\n")
        assert reading.mapping["optimizer"] == "adamw-4bit"
    muon = read(tmp_path, "muon.yaml", "base_model: Qwen/Qwen3-32B\noptimizer: muon\n")
    assert "no state model for muon" in {item.setting: item.reason for item in muon.ignored}["optimizer"]


def test_trl_trains_the_full_model_without_use_peft(tmp_path: Path) -> None:
    # HANDBOOK recipes/zephyr-7b-beta/sft/config_full.yaml (model_name_or_path, torch_dtype,
    # bf16, gradient_checkpointing, max_length, per_device_train_batch_size,
    # gradient_accumulation_steps; no use_peft)
    text = (
        "model_name_or_path: mistralai/Mistral-7B-v0.3\ntorch_dtype: bfloat16\nbf16: true\n"
        "gradient_accumulation_steps: 2\ngradient_checkpointing: true\nmax_length: 2048\n"
        "per_device_train_batch_size: 16\n"
    )
    reading = read(tmp_path, "config_full.yaml", text)
    assert reading.mapping["method"] == "full"  # trl/trainer/model_config.py:103 use_peft False
    assert reading.mapping["precision"] == "bf16"  # bf16 over bfloat16 weights
    assert reading.mapping["recipe"] == "trl"
    # with use_peft, TRL's ModelConfig LoRA defaults: r 16, alpha 32, dropout 0.05 (:107-:115)
    lora = read(tmp_path, "config_lora.yaml", text + "use_peft: true\n").mapping
    assert lora["method"] == "lora" and lora["lora"] == {"rank": 16, "alpha": 32, "dropout": 0.05}


def test_the_trainer_defaults_under_trl(tmp_path: Path) -> None:
    # TRL examples/cli_configs/example_config.yaml: model_name_or_path, dataset_name, report_to,
    # learning_rate, lr_scheduler_type, and nothing else that sizes the run
    text = (
        "model_name_or_path: Qwen/Qwen2.5-0.5B\ndataset_name: stanfordnlp/imdb\nreport_to: none\n"
        "learning_rate: 0.0001\nlr_scheduler_type: cosine\n"
    )
    reading = read(tmp_path, "example_config.yaml", text)
    mapping = reading.mapping
    assert reading.files[0][1] == "hf"
    # transformers training_args.py:777 per_device_train_batch_size 8, :849 accumulation 1
    assert mapping["micro_batch"] == 8 and mapping["grad_accum"] == 1
    assert mapping["optimizer"] == "adamw-fused"  # :811 adamw_torch_fused with torch 2.8+


def test_torchtitan_without_a_global_batch_does_not_accumulate(tmp_path: Path) -> None:
    # TORCHTITAN torchtitan/models/llama3/train_configs/llama3_8b.toml: [training] with
    # local_batch_size and seq_len but no global_batch_size
    text = (
        '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n'
        "[parallelism]\ndata_parallel_shard_degree = -1\n"
        '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n'
    )
    mapping = read(tmp_path, "llama3_8b.toml", text).mapping
    # config/job_config.py:256 global_batch_size -1; train.py:200 makes it local x dp: no accumulation
    assert mapping["grad_accum"] == 1
    assert mapping["precision"] == "bf16-mixed"  # :282 mixed_precision_param bfloat16, FSDP2
    assert mapping["fsdp_reduce_dtype"] == "fp32"  # :290 mixed_precision_reduce float32
    # with nothing set, selective_ac_option "2" (:655): every second block checkpointed
    plain = read(tmp_path, "bare.toml", '[model]\nname = "llama3"\nflavor = "8B"\n').mapping
    assert plain["activation_checkpointing"] == "full:2" and plain["micro_batch"] == 8


def test_deepspeed_alone_without_a_precision_block_trains_fp32(tmp_path: Path) -> None:
    # DS_EXAMPLES training/imagenet/config/ds_config.json: train_batch_size,
    # gradient_accumulation_steps, optimizer, no fp16 or bf16 block
    text = (
        '{"train_batch_size": 256, "gradient_accumulation_steps": 1, "steps_per_print": 2000,'
        ' "optimizer": {"type": "Adam", "params": {"lr": 0.001}}}'
    )
    reading = read(tmp_path, "ds_config.json", text)
    # runtime/precision_config.py:46, :105 both blocks default to enabled false: fp32
    assert reading.mapping["precision"] == "fp32"
    # runtime/config.py:962-964: with the accumulation and no micro-batch, micro = global /
    # (accumulation x data-parallel GPUs)
    assert reading.mapping["micro_batch"] == 256 and reading.mapping["grad_accum"] == 1
    # beside a trainer's file that sets the precision, the trainer's wins (bf16 under DeepSpeed:
    # fp32 master weights in its ZeRO optimizer)
    trainer = read(
        tmp_path,
        "run.yaml",
        "base_model: Qwen/Qwen2.5-7B\nmicro_batch_size: 4\nbf16: true\ndeepspeed: zero2.json\n",
        **{"zero2.json": '{"zero_optimization": {"stage": 2}, "train_batch_size": 256}'},
    )
    assert trainer.mapping["precision"] == "bf16-mixed"
    # the trainer states the micro-batch: DeepSpeed's accumulation follows (runtime/config.py:956)
    assert trainer.mapping["micro_batch"] == 4 and trainer.mapping["grad_accum"] == 64


def test_deepspeed_bf16_master_and_states_is_pure_bf16(tmp_path: Path) -> None:
    base = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": true'
    mixed = read(tmp_path, "a.json", base + "}}").mapping
    pure = read(
        tmp_path, "b.json", base + ', "bf16_master_weights_and_grads": true, "bf16_optimizer_states": true}}'
    ).mapping
    assert mixed["precision"] == "bf16-mixed" and pure["precision"] == "bf16"


def test_deepspeed_autotp_and_the_gpus_it_needs(tmp_path: Path) -> None:
    # LLAMA_FACTORY examples/deepspeed/ds_z2_autotp_config.json: tensor_parallel.autotp_size 2
    text = (
        '{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2},'
        ' "tensor_parallel": {"autotp_size": 2}}'
    )
    reading = read(tmp_path, "ds_z2_autotp_config.json", text)
    assert reading.mapping["tensor_parallel"] == 2 and reading.mapping["gpus"] == 2
    assert source(reading, "gpus").note.startswith("no GPU count given")


def test_torchtunes_linear_cross_entropy_is_the_chunked_class(tmp_path: Path) -> None:
    # TORCHTUNE recipes/configs/llama3_1/8B_lora_single_device.yaml: model, loss, optimizer
    text = (
        "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_8b\n"
        "  lora_attn_modules: ['q_proj', 'v_proj', 'output_proj']\n  lora_rank: 8\n  lora_alpha: 16\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n  fused: True\n"
        "loss:\n  _component_: torchtune.modules.loss.LinearCrossEntropyLoss\n"
        "batch_size: 2\ngradient_accumulation_steps: 8\n"
    )
    reading = read(tmp_path, "8B_lora_single_device.yaml", text)
    # modules/loss/cross_entropy_loss.py compute_cross_entropy: each chunk's fp32 log-softmax is
    # kept for backward, as the chunked class keeps it (not a fused kernel)
    assert reading.mapping["loss"] == "chunked"
    # recipes/lora_finetune_single_device.py:180, :183 read both with default False
    assert reading.mapping["activation_checkpointing"] == "none"
    assert reading.mapping["activation_offload"] is False


def test_torchtune_tensor_parallel_needs_its_gpus(tmp_path: Path) -> None:
    # TORCHTUNE recipes/configs/llama3_3/70B_full_multinode.yaml, lines 1, 20, 23-24, and its
    # model, optimizer and loss
    text = (
        "# Config for multi-node full finetuning in full_finetune_distributed.py\n"
        "tensor_parallel_dim: 8\ndata_parallel_shard_dim: -1\ndata_parallel_replicate_dim: 1\n"
        "model:\n  _component_: torchtune.models.llama3_1.llama3_1_70b\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n"
        "loss:\n  _component_: torchtune.modules.loss.LinearCrossEntropyLoss\n"
        "batch_size: 4\ngradient_accumulation_steps: 1\n"
    )
    reading = read(tmp_path, "70B_full_multinode.yaml", text)
    assert reading.mapping["tensor_parallel"] == 8 and reading.mapping["gpus"] == 8
    assert reading.mapping["zero_stage"] == 3  # the comment names full_finetune_distributed


def test_a_generation_config_is_refused(tmp_path: Path) -> None:
    # TORCHTUNE recipes/configs/generation.yaml: a model and a checkpointer, no optimizer or loss
    text = "model:\n  _component_: torchtune.models.llama2.llama2_7b\nmax_new_tokens: 300\n"
    with pytest.raises(InputError, match="a generation, evaluation or quantization config"):
        read(tmp_path, "generation.yaml", text)


def test_accelerate_fsdp1_strategy_and_an_unquoted_no(tmp_path: Path) -> None:
    # TRL examples/accelerate_configs/fsdp1.yaml: fsdp_version 1 with a ShardingStrategy in
    # fsdp_reshard_after_forward (accelerate utils/dataclasses.py: bool | str)
    fsdp1 = (
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_reshard_after_forward: FULL_SHARD\n"
        "  fsdp_version: 1\nmixed_precision: bf16\nnum_processes: 8\n"
    )
    assert read(tmp_path, "fsdp1.yaml", fsdp1).mapping["zero_stage"] == 3
    # ACCELERATE tests/test_configs/0_30_0_sagemaker.yaml: `distributed_type: NO`, which YAML 1.1
    # reads as false
    no = read(tmp_path, "sagemaker.yaml", "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: NO\n")
    assert no.mapping["zero_stage"] == 0


def test_llama_factory_reads_attention_names_and_refuses_prediction(tmp_path: Path) -> None:
    # LLAMA_FACTORY examples/v1/train_full/train_full_ulysses_cp.yaml: flash_attn takes
    # transformers' names there; the v0 names (fa2) and auto (transformers' default) too
    for value, kind in (("flash_attention_2", "flash"), ("fa2", "flash"), ("auto", "sdpa")):
        text = (
            f"model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: full\nflash_attn: {value}\n"
        )
        assert read(tmp_path, f"{value}.yaml", text).mapping["attention"] == kind
    # LLAMA_FACTORY examples/extras/nlg_eval/llama3_lora_predict.yaml: do_predict, no do_train
    predict = (
        "model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\ndo_predict: true\nfinetuning_type: lora\n"
    )
    with pytest.raises(InputError, match="a prediction run"):
        read(tmp_path, "predict.yaml", predict)
    # LLAMA_FACTORY examples/extras/qoft/llama3_oft_sft_bnb_npu.yaml: the method is what is refused
    qoft = "model_name_or_path: meta-llama/Llama-3.1-8B\nfinetuning_type: oft\nquantization_bit: 4\n"
    with pytest.raises(InputError, match="oft is not modelled yet"):
        read(tmp_path, "qoft.yaml", qoft)


@pytest.mark.parametrize(
    ("hub_id", "catalog", "how"),
    [
        ("NousResearch/Meta-Llama-3.1-8B", "Llama-3.1-8B", "a copy of meta-llama/Llama-3.1-8B"),
        ("NousResearch/Llama-2-7b-hf", "Llama-2-7B", "a copy of meta-llama/Llama-2-7b-hf"),
        ("unsloth/Llama-3.2-1B-Instruct-bnb-4bit", "Llama-3.2-1B", "Llama-3.2-1B-Instruct has its shapes"),
        ("Qwen/Qwen3-4B-Instruct-2507", "Qwen3-4B", "Qwen/Qwen3-4B-Instruct-2507 has its shapes"),
        # the alignment handbook's zephyr-7b-beta recipes: a Mistral-7B-v0.1 fine-tune
        ("HuggingFaceH4/zephyr-7b-beta", "Mistral-7B-v0.1", "HuggingFaceH4/zephyr-7b-beta has its shapes"),
    ],
)
def test_hub_mirrors_and_same_shape_variants_resolve_offline(
    tmp_path: Path, hub_id: str, catalog: str, how: str
) -> None:
    reading = read(tmp_path, "m.yaml", f"base_model: {hub_id}\nmicro_batch_size: 1\n")
    assert reading.mapping["model"] == catalog
    assert f"read {hub_id} as the catalog's {catalog}" in source(reading, "model").note
    assert how in source(reading, "model").note


@pytest.mark.parametrize("hub_id", ["google/gemma-2b", "someone/Llama-3.1-8B-finetuned"])
def test_a_model_of_unknown_shapes_is_refused_with_the_close_ones(tmp_path: Path, hub_id: str) -> None:
    # Gemma 2B (18 layers, one KV head) is not the catalog's Gemma-2-2B: not the same model
    with pytest.raises(InputError) as caught:
        read(tmp_path, "m.yaml", f"base_model: {hub_id}\nmicro_batch_size: 1\n")
    message = caught.value.message
    assert "close catalog models: " in message and "--model path/to/config.json" in message
    assert message.count("--model") == 1


def test_references_resolve_from_where_the_framework_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # AXOLOTL examples/mistral/mixtral/mixtral.yml: `deepspeed: deepspeed_configs/zero2.json`,
    # a path from the checkout's top, where axolotl runs
    (tmp_path / "deepspeed_configs").mkdir()
    (tmp_path / "deepspeed_configs" / "zero2.json").write_text('{"zero_optimization": {"stage": 2}}')
    config = tmp_path / "examples" / "mistral" / "mixtral" / "mixtral.yml"
    config.parent.mkdir(parents=True)
    config.write_text("base_model: mistralai/Mixtral-8x7B-v0.1\ndeepspeed: deepspeed_configs/zero2.json\n")
    monkeypatch.chdir(tmp_path)
    assert scenario_from_config([config]).mapping["zero_stage"] == 2
    # given beside it with --from, it is found by name wherever the command runs
    monkeypatch.chdir(config.parent)
    both = scenario_from_config([config, tmp_path / "deepspeed_configs" / "zero2.json"])
    assert both.mapping["zero_stage"] == 2 and len(both.files) == 2


def test_each_reader_default_is_the_frameworks_declared_default() -> None:
    """Every default a reader applies equals the field's default in framework_defaults.yaml, read
    from the framework's source; a value in effect that differs says why (`effective`)."""
    from trainplan.inputs.configs import READERS, reader

    checked = 0
    for name in READERS:
        module = reader(name)
        tables: list[dict[str, Default]] = [
            value
            for value in vars(module).values()
            if isinstance(value, dict) and value and all(isinstance(item, Default) for item in value.values())
        ]
        for table in tables:
            for setting, default in table.items():
                record = declared(default.framework, default.where)
                stated = record.get("default", record.get("default_expr"))
                candidates = {item["value"] for item in record.get("default_candidates", [])}
                if default.effective:
                    assert record.get("set_later") or candidates or stated != default.value, (
                        setting,
                        default,
                    )
                    assert default.value == stated or default.value in candidates or record.get("set_later")
                else:
                    assert default.value == stated, (name, setting, default, stated)
                checked += 1
    assert checked >= 35
    assert {"axolotl", "trl", "transformers", "torchtitan", "torchtune", "llama_factory"} <= set(
        framework_defaults()
    )


def test_llama_factory_v1_configs_are_read_as_the_v1_trainer_reads_them(tmp_path: Path) -> None:
    # LLAMA_FACTORY examples/v1/train_qlora/quantization.yaml: model, peft_config, quant_config,
    # dist_config, micro_batch_size, cutoff_len, max_steps (and data, sample and kernel settings)
    text = (
        "model: Qwen/Qwen3-0.6B\nmodel_class: llm\npeft_config:\n  name: lora\n  r: 16\n  lora_alpha: 32\n"
        "  lora_dropout: 0.05\n  target_modules: all\nkernel_config:\n  name: auto\n"
        "dist_config:\n  name: fsdp2\n  dcp_path: null\nquant_config:\n  name: bnb\n  quantization_bit: 4\n"
        "train_dataset: data/v1_sft_demo.yaml\noutput_dir: outputs/test_quantization\nmicro_batch_size: 1\n"
        "cutoff_len: 2048\nlearning_rate: 1.0e-4\nmax_steps: 10\n"
    )
    reading = read(tmp_path, "quantization.yaml", text)
    assert reading.files[0][1] == "llama-factory-v1"
    mapping = reading.mapping
    assert (mapping["method"], mapping["base_weights"]) == ("qlora", "nf4")
    assert mapping["lora"] == {"rank": 16, "alpha": 32, "dropout": 0.05, "targets": "all-linear"}
    assert mapping["zero_stage"] == 3  # dist_config fsdp2: FSDP2 full sharding
    # v1/config/training_args.py: enable_activation_checkpointing True, bf16 True; no
    # global_batch_size: no accumulation; core/base_trainer.py: torch.optim.AdamW
    assert mapping["activation_checkpointing"] == "full" and mapping["grad_accum"] == 1
    assert mapping["optimizer"] == "adamw" and mapping["attention"] == "sdpa"  # model_args.py flash_attn SDPA
    # no peft_config: the full model
    full = read(tmp_path, "full.yaml", "model: Qwen/Qwen3-0.6B\nmodel_class: llm\nmicro_batch_size: 2\n")
    assert full.mapping["method"] == "full" and full.mapping["micro_batch"] == 2


def test_fsdp_version_decides_the_master_copy_and_the_units(tmp_path: Path) -> None:
    # AXOLOTL examples/llama-3/fft-8b-liger-fsdp.yaml lines 1, 44, 58-71: bf16 auto, the legacy
    # fsdp list and an fsdp_config with no fsdp_version
    fsdp1 = (
        "base_model: NousResearch/Meta-Llama-3.1-8B\nbf16: auto\nfsdp:\n  - full_shard\n  - auto_wrap\n"
        "fsdp_config:\n  fsdp_offload_params: true\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
        "  fsdp_sharding_strategy: FULL_SHARD\n"
    )
    one = read(tmp_path, "fft-8b-liger-fsdp.yaml", fsdp1).mapping
    # utils/schemas/validation.py:1118-1123 pins fsdp_version 1; accelerate's FSDP1 prepare
    # upcasts every trainable FlatParameter to fp32 (accelerator.py:2017-2031): an fp32 master
    assert one["precision"] == "bf16-mixed" and one["zero_stage"] == 3
    # FSDP1's transformer auto-wrap leaves the embedding, norm and head in the root unit
    assert one["fsdp_wrap"] == "root"
    # AXOLOTL examples/alst/llama3-8b-fsdp2-alst.yaml lines 1, 34, 51-57
    fsdp2 = (
        "base_model: meta-llama/Llama-3.1-8B\nbf16: auto\nfsdp_version: 2\nfsdp_config:\n"
        "  offload_params: false\n  auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  reshard_after_forward: true\n"
    )
    two = read(tmp_path, "llama3-8b-fsdp2-alst.yaml", fsdp2).mapping
    # loaders/patch_manager.py:343-351 swaps in monkeypatch/accelerate/fsdp2.py:539, which
    # neither upcasts (no float32 cast in it) nor carves out the embedding and head (:759-768)
    assert two["precision"] == "bf16" and two["fsdp_wrap"] == "root" and two["zero_stage"] == 3
    # TRL examples/accelerate_configs/fsdp2.yaml: accelerate's own FSDP2 prepare upcasts too
    # (utils/fsdp_utils.py:806-810) and shards the embedding and [norm, lm_head] as their own
    # units (:847-856)
    accelerate2 = (
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
        "  fsdp_reshard_after_forward: true\n  fsdp_version: 2\nmixed_precision: bf16\nnum_processes: 8\n"
    )
    carved = read(tmp_path, "fsdp2.yaml", accelerate2).mapping
    assert carved["fsdp_wrap"] == "layers" and carved["precision"] == "bf16-mixed"
    # the HF Trainer's own fsdp option over a bf16 flag goes through the same FSDP1 prepare
    trainer = read(
        tmp_path,
        "args.yaml",
        "output_dir: out\nper_device_train_batch_size: 2\nbf16: true\nfsdp: full_shard auto_wrap\n",
    ).mapping
    assert trainer["precision"] == "bf16-mixed"


def test_deepspeed_zero3_master_torch_adam_and_micro_batch_alone(tmp_path: Path) -> None:
    # ACCELERATE examples/deepspeed_config_templates/zero_stage1_config.json lines 2-3, 10-18, 28-29
    text = (
        '{"fp16": {"enabled": true}, "optimizer": {"type": "AdamW", "params": {"lr": "auto",'
        ' "torch_adam": true, "adam_w_mode": true}}, "zero_optimization": {"stage": 1},'
        ' "train_micro_batch_size_per_gpu": "auto"}'
    )
    # runtime/engine.py:2096-2106 (deepspeedai/DeepSpeed@edaa7221): torch_adam builds
    # torch.optim.AdamW, not FusedAdam
    assert read(tmp_path, "zero_stage1_config.json", text).mapping["optimizer"] == "adamw"
    # ACCELERATE tests/deepspeed/ds_config_zero3_model_only.json: fp16 and bf16 "auto", stage 3,
    # offload_param cpu, train_micro_batch_size_per_gpu 1 and nothing else about the batch
    zero3 = (
        '{"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3,'
        ' "offload_param": {"device": "cpu", "pin_memory": true}}, "train_micro_batch_size_per_gpu": 1}'
    )
    reading = read(tmp_path, "ds_config_zero3_model_only.json", zero3).mapping
    # runtime/config.py:978-980: a micro-batch alone sets gradient_accumulation_steps 1
    assert reading["grad_accum"] == 1 and reading["micro_batch"] == 1
    # stage 3 keeps 16-bit partitions beside the fp32 master in its optimizer
    # (runtime/zero/stage3.py _create_fp32_partitions)
    assert reading["zero3_master"] == "separate" and "precision" not in reading
    # DS_EXAMPLES training/imagenet/config/ds_config.json lines 2, 20, 23-24: an fp16 block with
    # enabled false and no bf16 block trains fp32 (runtime/precision_config.py)
    imagenet = '{"train_batch_size": 256, "zero_optimization": {"stage": 0}, "fp16": {"enabled": false}}'
    assert read(tmp_path, "ds_config.json", imagenet).mapping["precision"] == "fp32"


def test_torchtune_units_qlora_base_and_the_downloaded_model(tmp_path: Path) -> None:
    # TORCHTUNE recipes/configs/llama3_1/8B_full.yaml lines 9, 46, 84 and 70B_lora.yaml lines 9,
    # 15, 89 (custom_sharded_layers commented out)
    full = (
        "# tune run --nproc_per_node 4 full_finetune_distributed --config llama3_1/8B_full\n"
        "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n"
        "custom_sharded_layers: ['tok_embeddings', 'output']\n"
    )
    # training/_distributed.py get_shard_conditions: each layers.<i> and the names listed are
    # their own FSDP2 units, the rest the root's
    assert read(tmp_path, "8B_full.yaml", full).mapping["fsdp_wrap"] == "layers"
    lora = (
        "# tune run --nproc_per_node 8 lora_finetune_distributed --config llama3_1/70B_lora\n"
        "model:\n  _component_: torchtune.models.llama3_1.lora_llama3_1_70b\n  quantize_base: true\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n"
    )
    unlisted = read(tmp_path, "70B_lora.yaml", lora).mapping
    assert unlisted["fsdp_wrap"] == "root"
    # a lora_ builder with quantize_base is the qlora_ builder: an NF4 base
    # (models/llama3_1/_model_builders.py qlora_llama3_1_70b = partial(lora_..., quantize_base=True))
    assert unlisted["method"] == "qlora"
    # TORCHTUNE recipes/configs/mistral/7B_lora.yaml line 50: the builder's shapes (vocabulary
    # 32000, models/mistral/_model_builders.py:29) are the catalog's Mistral-7B-v0.1, not v0.3
    mistral = (
        "model:\n  _component_: torchtune.models.mistral.lora_mistral_7b\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n"
    )
    assert read(tmp_path, "7B_lora.yaml", mistral).mapping["model"] == "Mistral-7B-v0.1"
    # TORCHTUNE recipes/configs/gemma/2B_lora.yaml lines 6, 42: a builder no catalog model
    # matches is the checkpoint its header downloads (looked up on the Hub; refused offline)
    gemma = (
        '#   tune download google/gemma-2b --ignore-patterns "gemma-2b.gguf"\n'
        "model:\n  _component_: torchtune.models.gemma.lora_gemma_2b\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n"
    )
    with pytest.raises(InputError) as refused:
        read(tmp_path, "2B_lora.yaml", gemma)
    assert "'google/gemma-2b'" in refused.value.message
    assert "tune download google/gemma-2b" in refused.value.message


def test_torchtitan_compile_components_and_the_reshard_policy(tmp_path: Path) -> None:
    # TORCHTITAN torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml lines 67-69,
    # over the llama3 8B model lines of llama3_8b.toml
    model = '[model]\nname = "llama3"\nflavor = "8B"\n'
    loss_only = read(tmp_path, "a.toml", model + '[compile]\nenable = true\ncomponents = ["loss"]\n').mapping
    # config/job_config.py:722-725: the components compiled; without "model" no block is
    assert loss_only["compile"] is False
    assert read(tmp_path, "b.toml", model + "[compile]\nenable = true\n").mapping["compile"] is True
    # torchtitan/models/llama4/train_configs/llama4_17bx128e.toml lines 41, 44: shard degree -1
    # and 4 pipeline stages with no fsdp_reshard_after_forward: policy "default" keeps each
    # layer gathered from forward to backward under PP (models/llama3/infra/parallelize.py:325-327)
    pp = "[parallelism]\ndata_parallel_shard_degree = -1\npipeline_parallel_degree = 4\n"
    assert read(tmp_path, "c.toml", model + pp).mapping["zero_stage"] == 2
    always = pp + 'fsdp_reshard_after_forward = "always"\n'
    assert read(tmp_path, "d.toml", model + always).mapping["zero_stage"] == 3


def test_a_llama_factory_megatron_bridge_run(tmp_path: Path) -> None:
    # LLAMA_FACTORY examples/megatron_bridge/llama3_sft.yaml lines 2, 7, 32, 35-36, 43, 46, 49
    # (recompute_granularity commented out)
    text = (
        "model_name_or_path: meta-llama/Llama-3.2-1B-Instruct\nstage: sft\nfinetuning_type: lora\n"
        "per_device_train_batch_size: 1\nbf16: true\ntensor_model_parallel_size: 1\n"
        "pipeline_model_parallel_size: 1\nuse_distributed_optimizer: true\nmixed_precision: bf16_mixed\n"
        "# recompute_granularity: full\n"
    )
    reading = read(tmp_path, "llama3_sft.yaml", text)
    mapping = reading.mapping
    # hparams/megatron_bridge_args.py: mixed_precision bf16_mixed (fp32 main parameters in the
    # distributed optimizer, which shards them: ZeRO 1); recompute_granularity None recomputes
    # nothing, whatever LLaMA-Factory's own checkpointing default
    assert mapping["precision"] == "bf16-mixed" and mapping["zero_stage"] == 1
    assert mapping["activation_checkpointing"] == "none" and mapping["recipe"] == "megatron"
    assert ("bf16", "Megatron Bridge: mixed_precision and recompute_granularity decide") in {
        (item.setting, item.reason) for item in reading.ignored
    }
    selective = read(tmp_path, "s.yaml", text + "recompute_granularity: selective\n").mapping
    assert selective["activation_checkpointing"] == "selective"


def test_trl_command_line_configs_and_trl_versions(tmp_path: Path) -> None:
    # TRL examples/cli_configs/example_config.yaml: its header names `trl sft --config`, and it
    # sets only model_name_or_path, dataset_name and the schedule
    text = (
        "# This is an example configuration file of TRL CLI, you can use it for\n"
        "# SFT like that: `trl sft --config config.yaml --output_dir test-sft`\n"
        "model_name_or_path:\n  Qwen/Qwen2.5-0.5B\ndataset_name:\n  stanfordnlp/imdb\n"
        "learning_rate:\n  0.0001\n"
    )
    mapping = read(tmp_path, "example_config.yaml", text).mapping
    # TRL's defaults, not the plain Trainer's: the full model (model_config.py use_peft False),
    # max_length 1024 (sft_config.py), fp32 weights under bf16 autocast, checkpointing on
    assert mapping["recipe"] == "trl" and mapping["method"] == "full" and mapping["seq_len"] == 1024
    assert mapping["precision"] == "amp-bf16" and mapping["activation_checkpointing"] == "full"
    # sft_config.py:335-336 loss_type None -> chunked_nll; sft_trainer.py
    # _chunked_cross_entropy_loss keeps each chunk's logits only inside its own checkpointed
    # forward and backward: the fused class, the trl recipe's
    assert scenario_from_mapping(mapping).loss == "fused"
    assert read(tmp_path, "nll.yaml", text + "loss_type: nll\n").mapping["loss"] == "standard"
    # HANDBOOK recipes/zephyr-7b-beta/sft/config_full.yaml lines 32, 42: max_seq_length is TRL
    # 0.19's name (renamed max_length in 0.20), before the chunked loss (TRL 1.4)
    old = "model_name_or_path: Qwen/Qwen2.5-0.5B\ngradient_checkpointing: true\nmax_seq_length: 2048\n"
    assert read(tmp_path, "config_full.yaml", old).mapping["loss"] == "standard"
    # HANDBOOK recipes/zephyr-7b-beta/dpo/config_qlora.yaml: beta and max_prompt_length are DPO's
    dpo = read(
        tmp_path,
        "dpo.yaml",
        "model_name_or_path: Qwen/Qwen2.5-0.5B\nbeta: 0.01\nmax_length: 1024\nmax_prompt_length: 512\n",
    )
    assert dpo.mapping["loss"] == "standard"
    assert {item.setting for item in dpo.ignored if "preference" in item.reason} >= {
        "beta",
        "max_prompt_length",
    }


def test_one_machine_holds_every_process(tmp_path: Path) -> None:
    # LLAMA_FACTORY examples/accelerate/fsdp_config_offload.yaml lines 18-19: one machine, two
    # processes: the default node of 8 GPUs holds them; sixteen on one machine make a node of 16
    base = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_machines: 1\n"
    assert "gpus_per_node" not in read(tmp_path, "a.yaml", base + "num_processes: 2\n").mapping
    assert read(tmp_path, "b.yaml", base + "num_processes: 16\n").mapping["gpus_per_node"] == 16


def test_held_out_classes_flux_units_kbit_and_workers(tmp_path: Path) -> None:
    """The classes the held-out hand-checks (tests/corpus/held_out.yaml) found misread."""
    # TORCHTITAN torchtitan/models/flux/train_configs/flux_schnell_model.toml lines 20-22, 39, 44
    flux = (
        '[model]\nname = "flux"\nflavor = "flux-schnell"\n[training]\nimg_size = 256\n'
        '[encoder]\nt5_encoder = "google/t5-v1_1-xxl"\nmax_t5_encoding_len = 256\n'
    )
    mapping = read(tmp_path, "flux_schnell_model.toml", flux).mapping
    # models/flux/job_config.py:16 img_size (images resized and cropped to it), :34 the T5
    # length; models/flux/train.py:52-74 the autoencoder, CLIP and T5 on the GPU every step
    assert mapping["resolution"] == "256x256" and mapping["text_tokens"] == 256
    assert mapping["frozen_encoders"] == "gpu" and mapping["ema"] == "none" and "seq_len" not in mapping
    # AXOLOTL examples/mistral/mistral-qlora-fsdp.yml lines 1, 11, 23, 64-70: QLoRA under FSDP skips
    # prepare_model_for_kbit_training (loaders/model.py:162-165, :1003-1009)
    qlora = (
        "base_model: mistralai/Mixtral-8x7B-v0.1\nload_in_4bit: true\nadapter: qlora\n"
        "fsdp:\n  - full_shard\n  - auto_wrap\nfsdp_config:\n  fsdp_offload_params: false\n"
    )
    assert read(tmp_path, "mistral-qlora-fsdp.yml", qlora).mapping["kbit_upcast"] is False
    # TORCHTUNE recipes/configs/gemma2/2B_qlora_single_device.yaml line 34: Gemma2Attention
    # soft-caps its own q @ k^T (models/gemma2/_attention.py:24): eager
    gemma2 = (
        "model:\n  _component_: torchtune.models.gemma2.qlora_gemma2_2b\n"
        "optimizer:\n  _component_: torch.optim.AdamW\n"
    )
    assert read(tmp_path, "2B_qlora_single_device.yaml", gemma2).mapping["attention"] == "eager"
    # LLAMA_FACTORY examples/train_lora/qwen3_lora_sft_ray.yaml lines 2, 31: one GPU per Ray worker
    ray = "model_name_or_path: Qwen/Qwen3-4B-Instruct-2507\nfinetuning_type: lora\nray_num_workers: 4\n"
    assert read(tmp_path, "qwen3_lora_sft_ray.yaml", ray).mapping["gpus"] == 4
    # LLAMA_FACTORY examples/v1/train_full/train_full_muon.yaml lines 1-6: the v1 FSDP2 engine
    # leaves the head in the root unit and reduces in fp32 (v1/plugins/trainer_plugins/
    # distributed/fsdp2.py:206-213, :262-271)
    v1 = "model: Qwen/Qwen3-0.6B\nmodel_class: llm\ndist_config:\n  name: fsdp2\nmicro_batch_size: 1\n"
    fsdp2 = read(tmp_path, "train_full_muon.yaml", v1).mapping
    assert fsdp2["fsdp_wrap"] == "root" and fsdp2["fsdp_reduce_dtype"] == "fp32" and fsdp2["zero_stage"] == 3


def test_second_held_out_classes_one_process_and_a_preference_loss(tmp_path: Path) -> None:
    # TRL trl/accelerate_configs/single_gpu.yaml: distributed_type "NO" with num_processes 8 runs
    # one plain process (accelerate commands/launch.py:1212-1245)
    one = (
        'compute_environment: LOCAL_MACHINE\ndistributed_type: "NO"\nmixed_precision: bf16\n'
        "num_processes: 8\n"
    )
    assert read(tmp_path, "single_gpu.yaml", one).mapping["gpus"] == 1
    # HANDBOOK recipes/pref_align_scan/dpo/config_zephyr.yaml: beta and a DPO loss_type (sigmoid):
    # the preference trainer's log-probabilities over the full logits, not SFT's chunked loss
    dpo = (
        "model_name_or_path: Qwen/Qwen2.5-0.5B\nbf16: true\nbeta: 0.01\nloss_type: sigmoid\n"
        "max_prompt_length: 512\n"
    )
    assert read(tmp_path, "config_zephyr.yaml", dpo).mapping["loss"] == "standard"


@pytest.mark.parametrize(
    ("text", "stage", "reference"),
    [
        # trl/cli.py: the command names the trainer (its config's comment line says how it runs)
        ("# trl dpo --config dpo.yaml\nbeta: 0.1\n", "dpo", None),
        ("# trl reward --config rm.yaml\n", "rm", None),
        ("# trl kto --config kto.yaml\n", "kto", None),
        ("# trl cpo --config cpo.yaml\nloss_type: simpo\nsimpo_gamma: 0.5\n", "simpo", None),
        # keys only one trainer's config has (TRL 1.16.0 kto_config.py, dpo_config.py)
        ("desirable_weight: 1.0\nundesirable_weight: 1.0\n", "kto", None),
        ("beta: 0.1\nprecompute_ref_log_probs: true\n", "dpo", "precomputed"),
        ("beta: 0.1\nloss_type: apo_zero\n", "dpo", None),
    ],
)
def test_trl_preference_configs_name_their_stage(
    tmp_path: Path, text: str, stage: str, reference: str | None
) -> None:
    base = "model_name_or_path: Qwen/Qwen2.5-0.5B\nper_device_train_batch_size: 2\n"
    mapping = read(tmp_path, "trl.yaml", base + text).mapping
    assert mapping["stage"] == stage
    assert mapping.get("reference") == reference
    scenario_from_mapping(mapping)  # the stage's rules accept what was read


def test_an_ambiguous_trl_preference_config_stays_supervised(tmp_path: Path) -> None:
    """beta alone is DPO's, KTO's, ORPO's and CPO's: no stage is guessed; the loss is still the
    preference trainers' full-logits one."""
    mapping = read(tmp_path, "trl.yaml", "model_name_or_path: Qwen/Qwen2.5-0.5B\nbeta: 0.1\n").mapping
    assert "stage" not in mapping
    assert mapping["loss"] == "standard"


TITAN_8B = (
    # TORCHTITAN torchtitan/models/llama3/train_configs/llama3_8b.toml, lines 17-19, 31-33, 38-43
    '[model]\nname = "llama3"\nflavor = "8B"\n'
    "[training]\nlocal_batch_size = 1\nseq_len = 8192\n"
    "[parallelism]\ndata_parallel_replicate_degree = {replicate}\ndata_parallel_shard_degree = {shard}\n"
    "tensor_parallel_degree = {tp}\npipeline_parallel_degree = 1\ncontext_parallel_degree = {cp}\n"
)


@pytest.mark.parametrize(
    ("degrees", "expected"),
    [
        # tests/integration_tests/features.py:397-405 "FSDP+CP", ngpu=4
        ({"shard": 2, "replicate": 1, "cp": 2, "tp": 1}, {"gpus": 4, "zero_stage": 3, "shard": 4, "dp": 2}),
        # :407-417 "HSDP+CP (without dp_shard)", ngpu=4: FSDP still shards over the 2 CP ranks
        ({"shard": 1, "replicate": 2, "cp": 2, "tp": 1}, {"gpus": 4, "zero_stage": 3, "shard": 2, "dp": 2}),
        # :419-429 "HSDP+CP (with dp_shard)", ngpu=8
        ({"shard": 2, "replicate": 2, "cp": 2, "tp": 1}, {"gpus": 8, "zero_stage": 3, "shard": 4, "dp": 4}),
        # :431-441 "FSDP+TP+CP", ngpu=8
        ({"shard": 2, "replicate": 1, "cp": 2, "tp": 2}, {"gpus": 8, "zero_stage": 3, "shard": 4, "dp": 2}),
    ],
)
def test_torchtitan_context_parallel_and_hsdp(
    tmp_path: Path, degrees: dict[str, int], expected: dict[str, int]
) -> None:
    """The layouts torchtitan's own integration tests run (at TORCHTITAN), applied to the
    llama3_8b.toml they override: parallel_dims.py:53 world = dp_replicate x dp_shard x cp x tp
    (x pp, 1); FSDP over dp_shard x cp (fsdp = dp_shard * cp, :137) whenever either is above 1
    (fsdp_enabled, :334); HSDP's replicas outside it."""
    from trainplan.specs.scenario import data_parallel, shard_group

    reading = read(tmp_path, "llama3_8b.toml", TITAN_8B.format(**degrees))
    scenario = scenario_from_mapping(reading.mapping)
    assert scenario.gpus == expected["gpus"]
    assert scenario.context_parallel == degrees["cp"]
    assert scenario.data_parallel_replicate == degrees["replicate"]
    assert scenario.tensor_parallel == degrees["tp"]
    assert scenario.zero_stage == expected["zero_stage"]
    assert data_parallel(scenario) == expected["dp"]  # the batch's replicas: dp_replicate x dp_shard
    # the ranks each state is sharded over: dp_shard x cp
    shard = shard_group(data_parallel(scenario), scenario.context_parallel, scenario.data_parallel_replicate)
    assert shard == expected["shard"] == degrees["shard"] * degrees["cp"]


def test_accelerate_context_parallel_config(tmp_path: Path) -> None:
    # ACCELERATE examples/torch_native_parallelism/configs/cp.yaml, lines 3-12, 17-23
    text = (
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_activation_checkpointing: true\n"
        "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n  fsdp_offload_params: false\n"
        "  fsdp_reshard_after_forward: true\n  fsdp_version: 2\nmixed_precision: bf16\n"
        "num_machines: 1\nnum_processes: 8\nparallelism_config:\n  parallelism_config_cp_size: 8\n"
        "  parallelism_config_dp_replicate_size: 1\n  parallelism_config_dp_shard_size: 1\n"
        "  parallelism_config_tp_size: 1\n"
    )
    scenario = scenario_from_mapping(read(tmp_path, "cp.yaml", text).mapping)
    # parallelism_config.py: cp_size 8 of the 8 processes; FSDP2 over the flattened dp_shard_cp
    # mesh (fsdp_dim_names, :158-163): the states shard over all 8 ranks
    assert (scenario.gpus, scenario.context_parallel, scenario.zero_stage) == (8, 8, 3)
    assert scenario.data_parallel_replicate == 1


def test_hybrid_shard_replicates_across_the_nodes(tmp_path: Path) -> None:
    """FSDP1's HYBRID_SHARD shards within each node and replicates across nodes (torch
    distributed/fsdp/_init_utils.py _init_intra_and_inter_node_groups): with num_machines 2 the
    replicas are 2; the HF Trainer's `fsdp: hybrid_shard`, which names no node count, takes the
    nodes of gpus / gpus_per_node."""
    text = (
        "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\n"
        "  fsdp_version: 1\nnum_machines: 2\nnum_processes: 16\n"
    )
    scenario = scenario_from_mapping(read(tmp_path, "hybrid.yaml", text).mapping)
    assert (scenario.gpus, scenario.zero_stage, scenario.data_parallel_replicate) == (16, 3, 2)
    args = (
        "model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 1\n"
        "fsdp: hybrid_shard auto_wrap\n"
    )
    trainer = read(tmp_path, "args.yaml", args)
    assert trainer.mapping["data_parallel_replicate"] == 1  # one GPU, one node: no replicas
    from trainplan.inputs.configs import scenario_from_config

    on_four_nodes = scenario_from_config([tmp_path / "args.yaml"], overrides={"gpus": 32})
    assert on_four_nodes.mapping["data_parallel_replicate"] == 4


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        # torch/distributed/pipelining/schedules.py get_schedule_class matches without case;
        # torchtitan distributed/pipeline_parallel.py:114 (TORCHTITAN): 2 stages a rank for a
        # looped schedule, 1 otherwise
        ("Interleaved1F1B", {"pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2}),
        ("interleaved1f1b", {"pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2}),
        ("GPipe", {"pipeline_schedule": "gpipe", "virtual_stages": 1}),
        ("1F1B", {"pipeline_schedule": "1f1b", "virtual_stages": 1}),
        ("ZBVZeroBubble", {"pipeline_schedule": "zero-bubble-v", "virtual_stages": 2}),
        ("InterleavedZeroBubble", {"pipeline_schedule": None, "virtual_stages": 1}),
        # torchtitan tests/integration_tests/models.py:35-47 runs DualPipeV (2 stages a rank, V)
        ("DualPipeV", {"pipeline_schedule": "dualpipev", "virtual_stages": 2}),
    ],
)
def test_torchtitan_pipeline_schedules(tmp_path: Path, schedule: str, expected: dict[str, Any]) -> None:
    # TORCHTITAN torchtitan/models/llama3/train_configs/debug_model.toml line 52 names Interleaved1F1B
    text = TITAN_8B.format(shard=-1, replicate=1, tp=1, cp=1).replace(
        "pipeline_parallel_degree = 1",
        f'pipeline_parallel_degree = 2\npipeline_parallel_schedule = "{schedule}"',
    )
    # DualPipeV needs at least as many micro-batches as its 2 x 2 stages (torch raises)
    text = text.replace("local_batch_size = 1", "local_batch_size = 4")
    reading = read(tmp_path, "llama3_8b.toml", text)
    scenario = scenario_from_mapping({**reading.mapping, "gpus": 8})
    assert {name: getattr(scenario, name) for name in expected} == expected
    if expected["pipeline_schedule"] is None:
        ignored = {item.setting: item.reason for item in reading.ignored}
        assert ignored["parallelism.pipeline_parallel_schedule"].startswith(
            "not modelled yet: the InterleavedZeroBubble"
        )
