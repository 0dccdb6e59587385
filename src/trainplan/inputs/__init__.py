"""Outside formats into specs: Hugging Face configs, architecture data, framework configs, the
catalogs, user files, and resolving a model's name, path or Hub id."""
