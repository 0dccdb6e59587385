"""Training configs of other frameworks, read into a scenario and written back from a plan.

One module per framework (axolotl, torchtune, torchtitan, llama_factory, hf_trainer, accelerate,
deepspeed), each with its field table `RULES` (framework setting -> scenario fields, with a
converter and a note), `detect(data)` (from the content, not the file name), `recipe(flat)` and,
for those we write, `emit(scenario)`. `reading.py` detects, follows the files a config points at
(only inside the first file's folder; the web server only among the uploaded files), merges the
files, applies the user's own overrides and says where every field came from.

Nothing in a file is executed: YAML is loaded safely, `_component_` strings are never imported.
"""

from trainplan.inputs.configs.reading import (
    EMIT_FORMATS,
    FIELD,
    READERS,
    ConfigReading,
    emit,
    emit_axes,
    folder_resolver,
    formats,
    read_configs,
    reader,
    scenario_from_config,
    upload_resolver,
)

__all__ = [
    "EMIT_FORMATS",
    "FIELD",
    "READERS",
    "ConfigReading",
    "emit",
    "emit_axes",
    "folder_resolver",
    "formats",
    "read_configs",
    "reader",
    "scenario_from_config",
    "upload_resolver",
]
