// A small field table in the shape of GET /api/fields, for the unit tests.

export const FIELD_LIST = [
  { name: "model", kind: "text", default: "Llama-3.1-8B", label: "Model" },
  { name: "gpu", kind: "text", default: "H100 SXM 80GB", label: "GPU type" },
  { name: "method", kind: "choice", default: "lora", label: "Method", short_label: "method",
    choice_labels: { full: "Full", lora: "LoRA", qlora: "QLoRA" } },
  { name: "micro_batch", kind: "int", default: 1, label: "Micro-batch", short_label: "micro-batch" },
  { name: "lr", kind: "float", default: 0.0002, label: "Learning rate" },
  { name: "recipe", kind: "choice", default: null, nullable: true, label: "Framework recipe" },
  { name: "resolution", kind: "text", default: null, nullable: true, label: "Resolution", families: ["diffusion", "video"] },
  { name: "lora.rank", kind: "int", default: 16, label: "LoRA rank", methods: ["lora", "qlora"] },
  { name: "lora.alpha", kind: "int", default: 32, label: "LoRA alpha", methods: ["lora", "qlora"] },
  { name: "reference", kind: "choice", default: null, nullable: true, label: "Reference log-probs", stages: ["dpo", "kto"] },
  { name: "train_tokens", kind: "float", default: null, nullable: true, budget: "tokens", label: "Training tokens" },
  { name: "dataset_tokens", kind: "float", default: null, nullable: true, budget: "dataset", label: "Dataset tokens" },
  { name: "epochs", kind: "float", default: 1, nullable: false, budget: "dataset", label: "Epochs" },
  { name: "steps", kind: "int", default: null, nullable: true, budget: "steps", label: "Steps" },
];

export const META = {
  fields: FIELD_LIST,
  budget_modes: [{ id: "tokens", label: "Tokens" }, { id: "dataset", label: "Dataset" }, { id: "steps", label: "Steps" }],
  model_config_key: "model_config",
};

export const FIELDS = Object.fromEntries(FIELD_LIST.map((field) => [field.name, field]));

export const MODELS = [
  { name: "Llama-3.1-8B", hub_id: "meta-llama/Llama-3.1-8B", aliases: ["llama3-8b"], kind: "llm" },
  { name: "FLUX.1-dev", hub_id: "black-forest-labs/FLUX.1-dev", aliases: ["flux-dev"], kind: "diffusion" },
];

/** A page state with the table loaded: `values` over the defaults. */
export function page(values = {}, extra = {}) {
  const defaults = Object.fromEntries(FIELD_LIST.map((field) => [field.name, field.default === null ? "" : String(field.default)]));
  return {
    meta: META, fields: FIELDS, models: MODELS, result: null, config: null, stated: new Set(),
    values: { ...defaults, ...values }, ...extra,
  };
}
