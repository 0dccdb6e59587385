"""The page's "drop your config" zone in a real browser, and /api/config behind it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_page import Page, api, assert_shows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
AXOLOTL = FIXTURES / "axolotl" / "mistral-full-zero3.yml"
DEEPSPEED = FIXTURES / "axolotl" / "deepspeed_configs" / "zero3_bf16.json"
DROP = """([files]) => {
  const transfer = new DataTransfer();
  for (const [name, text] of files) transfer.items.add(new File([text], name));
  const zone = document.getElementById('config-drop');
  zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: transfer, bubbles: true, cancelable: true}));
  zone.dispatchEvent(new DragEvent('drop', {dataTransfer: transfer, bubbles: true, cancelable: true}));
}"""


@pytest.fixture
def page(browser: Any, live_server: str) -> Iterator[Page]:
    """The page at desktop width; no script errors, no request leaves the server."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    wrapped = Page(context.new_page(), live_server)
    yield wrapped
    assert not wrapped.errors, wrapped.errors
    assert all(url.startswith((live_server, "blob:", "data:")) for url in wrapped.requests), wrapped.requests
    context.close()


def posted(client: TestClient, files: list[tuple[str, str]], status: int = 200) -> dict[str, Any]:
    response = client.post("/api/config", json={"files": [{"name": n, "text": t} for n, t in files]})
    assert response.status_code == status, response.text
    data: dict[str, Any] = response.json()
    return data


def test_api_reads_posted_files_and_their_references(client: TestClient) -> None:
    files = [("mistral.yml", AXOLOTL.read_text()), ("zero3_bf16.json", DEEPSPEED.read_text())]
    data = posted(client, files)
    assert data["files"] == [
        {"file": "mistral.yml", "format": "axolotl"},
        {"file": "zero3_bf16.json", "format": "deepspeed"},
    ]
    scenario = data["scenario"]
    assert (scenario["zero_stage"], scenario["micro_batch"], scenario["precision"]) == (3, 2, "bf16-mixed")
    texts = [item["text"] for item in data["provenance"]]
    assert "micro_batch = 2 (axolotl micro_batch_size, per GPU)" in texts
    # a reference the upload lacks, a path the server will not read, a body that is not files
    missing = posted(client, files[:1], 422)
    assert missing["field"] == "deepspeed" and "drop that file too" in missing["message"]
    assert posted(client, [("x.yml", "hello: 1\n")], 422)["field"] == "from"
    assert client.post("/api/config", json={"files": "nope"}).json()["field"] == "files"
    assert client.post("/api/config", json={"paths": ["/etc/passwd"]}).json()["field"] == "paths"


def test_dropped_config_fills_the_form_and_lists_the_mapping(page: Page, client: TestClient) -> None:
    page.open()
    before = page.renders()
    page.page.evaluate(
        DROP, [[["mistral.yml", AXOLOTL.read_text()], ["zero3_bf16.json", DEEPSPEED.read_text()]]]
    )
    page.page.wait_for_function(
        "() => document.getElementById('config-status').textContent.includes('read as')"
    )
    page.wait_render(before)
    status = page.text("#config-status")
    assert status == "mistral.yml read as axolotl; zero3_bf16.json read as deepspeed"
    lines = page.page.locator("#config-mapping li").all_inner_texts()
    assert "micro_batch = 2 (axolotl micro_batch_size, per GPU)" in lines
    assert any(line.startswith("zero3_bf16.json: train_micro_batch_size_per_gpu (auto") for line in lines)
    assert page.page.get_by_role("textbox", name="Micro-batch", exact=True).input_value() == "2"
    # the numbers shown are the API's for the scenario read from the files
    scenario = posted(
        client, [("mistral.yml", AXOLOTL.read_text()), ("zero3_bf16.json", DEEPSPEED.read_text())]
    )
    assert_shows(page, api(client, scenario["scenario"]))


def test_a_file_we_cannot_read_says_why(page: Page, tmp_path: Path) -> None:
    page.open()
    (tmp_path / "notes.yaml").write_text("hello: world\n")
    page.page.set_input_files("#config-files", str(tmp_path / "notes.yaml"))
    page.page.wait_for_function(
        "() => document.getElementById('config-status').textContent.includes('Could not')"
    )
    assert "not a training config we read" in page.text("#config-status")
    assert page.page.locator("#config-mapping li").count() == 0


def test_a_pasted_config_lists_what_the_cli_lists(page: Page, tmp_path: Path) -> None:
    """Pasted text is read as a dropped file is, and the page lists the CLI's provenance lines
    (`trainplan estimate --from`) and its ignored settings, in the same words."""
    from trainplan.inputs.configs import scenario_from_config

    text = (FIXTURES / "axolotl" / "llama3-lora-8b.yml").read_text()
    page.open()
    before = page.renders()
    page.page.fill("#config-paste", text)
    page.page.click("#config-paste-read")
    page.page.wait_for_function(
        "() => document.getElementById('config-status').textContent.includes('read as')"
    )
    page.wait_render(before)
    assert page.text("#config-status") == "pasted-config read as axolotl"
    shown = page.page.locator("#config-mapping li").all_inner_texts()
    (tmp_path / "pasted-config").write_text(text)
    cli = scenario_from_config([tmp_path / "pasted-config"])
    assert shown == [str(item) for item in cli.provenance] + [
        f"pasted-config: {item}" for item in cli.ignored
    ]
