"""The page in a real browser (Debian's Chromium, headless): controls, numbers, link, offline."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

GIB = 1024**3
TINY = {
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_attention_heads": 8,
    "num_hidden_layers": 4,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
    "_name_or_path": "acme/tiny-llama",
}


def gib(num_bytes: float) -> str:
    return f"{num_bytes / GIB:,.2f} GiB"


class Page:
    """A page plus every URL it requested."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.requests: list[str] = []
        page.on("request", lambda request: self.requests.append(request.url))
        self.errors: list[str] = []
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("console", self._console)

    def _console(self, message: Any) -> None:
        # A 4xx answer to a bad value is expected; the browser logs it as a failed resource.
        if message.type == "error" and "status of 422" not in message.text:
            self.errors.append(message.text)

    def open(self, query: str = "") -> None:
        self.page.goto(f"{self.base}/{query}")
        self.page.wait_for_selector("body[data-state=ready]")
        self.page.wait_for_selector("#controls fieldset")
        self.page.wait_for_function("() => document.body.dataset.chart === document.body.dataset.renders")

    def renders(self) -> int:
        return int(self.page.evaluate("Number(document.body.dataset.renders || 0)"))

    def wait_render(self, before: int) -> None:
        self.page.wait_for_function(
            "n => Number(document.body.dataset.renders || 0) > n && document.body.dataset.state === 'ready'"
            " && document.body.dataset.chart === document.body.dataset.renders",
            arg=before,
        )

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).inner_text()).strip()


@pytest.fixture
def page(browser: Any, live_server: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    wrapped = Page(context.new_page(), live_server)
    yield wrapped
    assert not wrapped.errors, wrapped.errors
    assert all(url.startswith((live_server, "blob:", "data:")) for url in wrapped.requests), wrapped.requests
    context.close()


def api(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/estimate", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def assert_shows(page: Page, data: dict[str, Any]) -> None:
    """The page's figures are the API's figures."""
    assert page.text("#total") == data["display"]["total"] == gib(data["memory"]["per_gpu"]["total_bytes"])
    assert page.text("#trainable") == data["display"]["trainable"]
    assert page.text("#weights") == data["display"]["weights"]
    assert page.text("#batch-line") == data["display"]["batch_line"]
    assert page.text("#terms-total") == f"{data['memory']['per_gpu']['total_bytes'] / GIB:,.2f}"
    for term, kind in data["memory"]["per_gpu"]["kinds"].items():
        row = page.page.locator(f'#terms tr[data-term="{term}"]')
        if term == "rollout" and data["memory"]["rollout"] is None:
            # a stage that generates nothing has no engine row
            assert row.count() == 0
            continue
        assert (
            row.locator("td").nth(0).inner_text()
            == f"{data['memory']['per_gpu'][term + '_bytes'] / GIB:,.2f}"
        )
        assert row.locator("td").nth(1).inner_text() == kind
    items = page.page.locator("#fit li[data-gpu]")
    assert items.count() == len(data["fit"])
    for row in data["fit"]:
        item = page.page.locator(f'#fit li[data-gpu="{row["gpu"]}"]')
        assert item.get_attribute("data-fits") == str(row["fits"]).lower()
        free = f"{gib(row['free_bytes'])} free" if row["fits"] else f"short {gib(-row['free_bytes'])}"
        assert item.locator(".free").inner_text() == free
    assert page.page.locator("#cli-command").input_value() == data["display"]["cli"]
    # the reserved and allocated figures beside the total, and the parts outside the allocator
    note = page.text("#allocated-note")
    memory = data["memory"]
    assert f"reserves {gib(memory['reserved_peak_bytes'])}" in note
    assert f"tensors take {gib(memory['allocated_peak_bytes'])}" in note
    assert f"CUDA context {gib(memory['device_overhead']['context_bytes'])}" in note
    assert page.page.locator('[data-card="time"] .big').inner_text() == data["display"]["duration"]
    hint_ids = [hint["id"] for hint in data["hints"]]
    assert (
        page.page.locator("#hints li[data-hint]").evaluate_all("els => els.map(e => e.dataset.hint)")
        == hint_ids
    )


def chart_data(page: Page) -> list[list[float]]:
    result: list[list[float]] = page.page.evaluate(
        "() => Chart.getChart(document.getElementById('memory-chart')).data.datasets.map(d => d.data)"
    )
    return result


def test_default_page_shows_the_api_numbers(page: Page, client: TestClient, tmp_path: Path) -> None:
    page.open()
    data = api(client, {"model": "Llama-3.1-8B"})
    assert_shows(page, data)
    # the chart is drawn by the chart library from the same numbers, one bar per phase
    series = chart_data(page)
    # every term but the rollout engine's, which only a stage that generates draws
    terms = [term for term in data["memory"]["per_gpu"]["kinds"] if term != "rollout"]
    assert data["memory"]["rollout"] is None
    assert len(series) == len(terms)
    for index, term in enumerate(terms):
        for phase_index, phase in enumerate(data["memory"]["phases"]):
            expected = data["memory"]["phases"][phase][f"{term}_bytes"] / GIB
            assert series[index][phase_index] == pytest.approx(expected)
    shot = tmp_path / "calculator-desktop.png"
    page.page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_controls_drive_the_estimate_and_the_link(page: Page, client: TestClient) -> None:
    page.open()
    before = page.renders()
    page.page.get_by_role("radio", name="QLoRA").check()
    page.wait_render(before)
    before = page.renders()
    page.page.get_by_role("textbox", name="Micro-batch", exact=True).fill("4")
    page.wait_render(before)
    before = page.renders()
    page.page.get_by_role("combobox", name="GPU type", exact=True).select_option("GeForce RTX 4090")
    page.wait_render(before)
    before = page.renders()
    page.page.get_by_role("textbox", name="Sequence length", exact=True).fill("4096")
    page.wait_render(before)
    body = {
        "model": "Llama-3.1-8B",
        "method": "qlora",
        "micro_batch": 4,
        "gpu": "GeForce RTX 4090",
        "seq_len": 4096,
    }
    assert_shows(page, api(client, body))

    query = parse_qs(urlsplit(page.page.url).query)
    assert query["method"] == ["qlora"] and query["micro_batch"] == ["4"] and query["seq_len"] == ["4096"]
    link = page.page.locator("#share-link").input_value()
    assert link == page.page.url

    # the shared link opens the same scenario, controls and numbers
    other = Page(page.page.context.new_page(), page.base)
    other.page.goto(link)
    other.page.wait_for_selector("body[data-state=ready]")
    other.page.wait_for_selector("#controls fieldset")
    assert other.page.locator("#f-method-qlora").is_checked()
    assert other.page.get_by_role("textbox", name="Micro-batch", exact=True).input_value() == "4"
    assert other.page.get_by_role("combobox", name="GPU type", exact=True).input_value() == "GeForce RTX 4090"
    assert other.text("#total") == page.text("#total")
    assert not other.errors


def test_bad_value_names_the_field(page: Page) -> None:
    page.open()
    page.page.get_by_role("textbox", name="Micro-batch", exact=True).fill("0")
    page.page.wait_for_selector("body[data-state=error]")
    assert (
        page.page.get_by_role("textbox", name="Micro-batch", exact=True).get_attribute("aria-invalid")
        == "true"
    )
    assert "between 1 and 65,536" in page.text('[data-field="micro_batch"] .field-error')
    # said once, under the field: the banner stays hidden and the summary points at the field
    assert page.page.locator("#error").is_hidden()
    assert page.text("#summary") == "Needs a fix: see Micro-batch"
    before = page.renders()
    page.page.get_by_role("textbox", name="Micro-batch", exact=True).fill("2")
    page.wait_render(before)
    assert page.page.locator("#error").is_hidden()


def test_hint_apply_makes_it_fit(page: Page, client: TestClient) -> None:
    page.open("?model=Llama-3.1-70B&method=full")
    assert "does not fit" in page.text("#summary")
    before = page.renders()
    page.page.locator('#hints li[data-hint="qlora"] button').click()
    page.wait_render(before)
    assert page.page.locator("#f-method-qlora").is_checked()
    assert_shows(page, api(client, {"model": "Llama-3.1-70B", "method": "qlora"}))
    assert "fits" in page.text("#summary")


def test_model_search_and_fit_list_buttons(page: Page, client: TestClient) -> None:
    page.open()
    model = page.page.get_by_role("combobox", name="Model", exact=True)
    model.fill("qwen3 30b")
    options = page.page.locator("#f-model-list [role=option]")
    assert options.first.inner_text().startswith("Qwen3-30B-A3B")
    before = page.renders()
    model.press("Enter")
    page.wait_render(before)
    before = page.renders()
    page.page.get_by_role("button", name="H200 SXM 141GB: use this GPU").click()
    page.wait_render(before)
    assert_shows(page, api(client, {"model": "Qwen3-30B-A3B", "gpu": "H200 SXM 141GB"}))


def test_pasted_config_json(page: Page, client: TestClient) -> None:
    page.open()
    page.page.locator("summary", has_text="Use your own config.json").click()
    page.page.get_by_label("or paste its contents").fill(json.dumps(TINY))
    before = page.renders()
    page.page.get_by_role("button", name="Use pasted config").click()
    page.wait_render(before)
    assert "acme/tiny-llama" in page.text(".chip")
    data = api(client, {"model": "acme/tiny-llama", "model_config": TINY})
    assert_shows(page, data)
    assert page.page.locator("#cli-note").is_visible()
    # the config travels in the link
    link = page.page.locator("#share-link").input_value()
    assert "config=" in link
    other = Page(page.page.context.new_page(), page.base)
    other.open(link.split("/", 3)[3])
    assert other.text("#total") == data["display"]["total"]


def test_json_download(page: Page, client: TestClient) -> None:
    page.open("?model=GPT-2&method=full")
    with page.page.expect_download() as download:
        page.page.get_by_role("button", name="Download result JSON").click()
    saved = json.loads(Path(download.value.path()).read_text())
    assert saved == api(client, {"model": "GPT-2", "method": "full"})


def test_every_control_is_labelled_and_keyboard_reachable(page: Page) -> None:
    page.open()
    unlabelled = page.page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea, button')]
            .filter(el => !el.hidden && el.type !== 'hidden')
            .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                       && !el.getAttribute('aria-labelledby') && !(el.textContent || '').trim())
            .map(el => el.outerHTML.slice(0, 80))"""
    )
    assert unlabelled == []
    page.page.keyboard.press("Tab")
    assert page.page.evaluate("document.activeElement.className") == "skip"
    # the model combobox works from the keyboard alone
    page.page.get_by_role("combobox", name="Model", exact=True).focus()
    page.page.keyboard.type("gemma 2 9")
    page.page.keyboard.press("ArrowDown")
    before = page.renders()
    page.page.keyboard.press("Enter")
    page.wait_render(before)
    assert page.page.get_by_role("combobox", name="Model", exact=True).input_value() == "Gemma-2-9B"


def test_phone_width(browser: Any, live_server: str, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone = Page(context.new_page(), live_server)
    phone.open("?model=Qwen2.5-7B&method=qlora")
    overflow = phone.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    assert phone.page.locator("#summary").is_visible()
    shot = tmp_path / "calculator-phone.png"
    phone.page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert not phone.errors
    context.close()


def planned(client: TestClient, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/plan", json=body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def test_planner_fills_the_calculator(page: Page, client: TestClient, tmp_path: Path) -> None:
    page.open("?model=Qwen2.5-0.5B")
    # open the panel and run a small plan from the keyboard alone
    page.page.locator("#planner > summary").focus()
    page.page.keyboard.press("Enter")
    max_gpus = page.page.get_by_role("textbox", name="Max GPUs", exact=True)
    assert max_gpus.is_visible() and max_gpus.input_value() == "64"
    assert page.text("#plan-this-method") == "This method (LoRA)"
    max_gpus.fill("8")
    max_gpus.press("Enter")
    page.page.wait_for_selector("body[data-plan=ready]")
    assert page.page.get_by_role("button", name="Plan", exact=True).is_enabled()

    # every catalog GPU is listed, consumer to datacenter; the planner's default set is checked:
    # the priced NVIDIA and AMD GPUs (TPUs, Gaudi and Trainium when named)
    gpus = client.get("/api/gpus").json()
    searched = [gpu["name"] for gpu in gpus if gpu["planned_by_default"]]
    assert searched == [g["name"] for g in gpus if g["has_price"] and g["vendor"] in ("NVIDIA", "AMD")]
    assert not any(g["planned_by_default"] for g in gpus if g["vendor"] in ("Google", "Intel", "AWS"))
    checked = page.page.locator("#plan-gpu-list input:checked").evaluate_all("els => els.map(e => e.value)")
    assert checked == searched
    # the page names the checked GPUs, so its answer is that of the same list named in the API,
    # under the default objective (the cheapest plan)
    assert page.page.locator("#plan-objective").input_value() == "cost"
    data = planned(client, {"model": "Qwen2.5-0.5B", "plan": {"max_gpus": 8, "gpu_types": searched}})
    assert data["plans"] == planned(client, {"model": "Qwen2.5-0.5B", "plan": {"max_gpus": 8}})["plans"]
    first = data["plans"][0]
    scenario, estimate = first["scenario"], first["estimate"]
    row = page.page.locator('#plan-table tr[data-plan="0"]')

    def cell(column: str) -> str:
        return str(row.locator(f'[data-col="{column}"]').inner_text()).strip()

    assert row.locator(".plan-hw").inner_text() == f"{scenario['gpus']} × {scenario['gpu']}"
    replicas = estimate["batch"]["replicas"]
    layout = f"{scenario['tensor_parallel']} / {scenario['pipeline_parallel']} / {replicas}"
    assert cell("layout") == f"{layout}, ZeRO {scenario['zero_stage']}"
    assert cell("batch") == f"{scenario['micro_batch']} × {scenario['grad_accum']}"
    # the three figures: the device's, then the allocator's reserved and allocated
    memory = estimate["memory"]
    assert row.locator(".plan-device").inner_text() == f"{memory['per_gpu']['total_bytes'] / GIB:,.2f}"
    reserved, allocated = memory["reserved_peak_bytes"] / GIB, memory["allocated_peak_bytes"] / GIB
    assert (
        row.locator(".plan-figures").inner_text() == f"reserved {reserved:,.2f} · allocated {allocated:,.2f}"
    )
    assert cell("time") == first["display"]["duration"] and cell("cost") == first["display"]["usd"]
    assert page.page.locator("#plan-table tbody tr").count() == len(data["plans"])
    assert page.text("#plan-table-caption") == data["display"]["heading"]
    options = page.page.locator("#plan-objective option").evaluate_all(
        "els => els.map(e => [e.value, e.text])"
    )
    assert options[:2] == [["time", "Fastest"], ["cost", "Cheapest"]] and len(options) == 5
    assert page.text("#plan-max-gpus-help") == "1, 2, 4, then whole nodes; at most 4,096"
    assert page.page.locator("#plan-explanation li").all_inner_texts() == data["explanation"]
    # the reasons a user acts on come first; impossible layouts sit behind "Search details"
    shown = page.page.locator("#plan-rejected th").all_inner_texts()
    actionable = [reason for reason in data["rejected"] if not reason.startswith("invalid:")]
    assert sorted(shown) == sorted(actionable)
    internal = page.page.locator("#plan-internal th").all_text_contents()
    assert len(internal) == len(data["rejected"]) - len(actionable)
    assert page.page.locator("#plan-internal").is_hidden()  # closed until asked for
    # the Pareto chart draws the front's cost against time
    series = page.page.evaluate(
        "() => Chart.getChart(document.getElementById('plan-chart')).data.datasets[0].data"
    )
    # the whole run's cost against its time (training steps and the fixed time per run)
    assert [point["y"] for point in series] == pytest.approx(
        [item["estimate"]["cost"]["run_usd"] for item in data["pareto"]]
    )
    assert [point["x"] for point in series] == pytest.approx(
        [item["estimate"]["time"]["run_s"] / 3600 for item in data["pareto"]]
    )

    before = page.renders()
    use = row.get_by_role("button", name=f"Use plan 1: LoRA on {scenario['gpus']} × {scenario['gpu']}")
    use.focus()
    page.page.keyboard.press("Enter")
    page.wait_render(before)
    assert page.text("#total") == gib(estimate["memory"]["per_gpu"]["total_bytes"])
    shown = api(client, scenario)
    assert shown["memory"]["per_gpu"]["total_bytes"] == estimate["memory"]["per_gpu"]["total_bytes"]
    assert shown["time"]["total_s"] == estimate["time"]["total_s"]
    assert_shows(page, shown)
    assert page.page.get_by_role("combobox", name="GPU type", exact=True).input_value() == scenario["gpu"]
    query = parse_qs(urlsplit(page.page.url).query)
    # the link names what differs from the defaults (one GPU is the default count)
    assert query["gpu"] == [scenario["gpu"]] and query.get("gpus", ["1"]) == [str(scenario["gpus"])]
    assert row.get_attribute("aria-current") == "true"
    page.page.add_style_tag(content=".summary { position: static; }")  # keep it off the element shot
    shot = tmp_path / "planner-desktop.png"
    page.page.locator("#planner").screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_the_planner_form_draws_the_options_marked_web(page: Page, client: TestClient) -> None:
    """The planner's controls are /api/fields `plan_options` marked "web" (index.html holds none),
    each with its declaration's label, help and placeholder; the choices come first, the GPU
    list last."""
    options = {option["name"]: option for option in client.get("/api/fields").json()["plan_options"]}
    page.open("?model=Qwen2.5-0.5B")
    page.page.locator("#planner > summary").click()
    drawn = page.page.evaluate(
        """() => [...document.querySelectorAll('#plan-form [data-plan-field]')].map(node => [
            node.dataset.planField,
            node.querySelector(':scope > label, :scope > .label, :scope > legend').textContent,
            (node.querySelector(':scope > .help') || {}).textContent ?? null])"""
    )
    names = [name for name, _, _ in drawn]
    assert sorted(names) == sorted(name for name, option in options.items() if "web" in option["interfaces"])
    assert names[0] == "objective" and names[-1] == "gpu_types"
    for name, label, help_text in drawn:
        assert label == options[name]["label"], name
        assert help_text is None or help_text.startswith(options[name]["form_help"] or ""), name
    budget = page.page.get_by_role("textbox", name=options["budget_usd"]["label"], exact=True)
    assert budget.get_attribute("placeholder") == options["budget_usd"]["placeholder"]
    assert page.page.get_by_role("group", name=options["gpu_types"]["label"]).is_visible()
    assert not page.errors


def test_planner_names_a_bad_option_and_fits_a_phone(browser: Any, live_server: str, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone = Page(context.new_page(), live_server)
    phone.open("?model=Qwen2.5-0.5B&method=qlora")
    phone.page.locator("#planner > summary").click()
    # "This method (QLoRA)" stays on one line at phone width
    label = phone.page.locator("#plan-this-method")
    assert label.inner_text() == "This method (QLoRA)"
    other = phone.page.locator("label:has(#plan-methods-any) span").bounding_box()
    box = label.bounding_box()
    assert box is not None and other is not None and box["height"] == pytest.approx(other["height"], abs=1)
    max_gpus = phone.page.get_by_role("textbox", name="Max GPUs", exact=True)
    max_gpus.fill("5000")
    phone.page.get_by_role("button", name="Plan", exact=True).click()
    phone.page.wait_for_selector("body[data-plan=error]")
    assert "plan.max_gpus" in phone.text("#plan-error")
    assert max_gpus.get_attribute("aria-invalid") == "true"
    max_gpus.fill("4")
    phone.page.get_by_role("radio", name="Any method").check()
    phone.page.get_by_role("combobox", name="Objective").select_option("cost")
    phone.page.get_by_role("button", name="Plan", exact=True).click()
    phone.page.wait_for_selector("body[data-plan=ready]")
    assert phone.page.locator("#plan-error").is_hidden()
    assert phone.page.locator("#plan-table tbody tr").count() >= 1
    overflow = phone.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    phone.page.add_style_tag(content=".summary { position: static; }")
    shot = tmp_path / "planner-phone.png"
    phone.page.locator("#planner").screenshot(path=str(shot))
    print(f"screenshot: {shot}")
    assert not phone.errors
    context.close()


def visible_text(locator: Any) -> str:
    """Text on screen: without the words only a screen reader hears."""
    text: str = locator.evaluate(
        "el => [...el.childNodes].filter(n => !(n.classList && n.classList.contains('visually-hidden')))"
        ".map(n => n.textContent).join('')"
    )
    return text


def test_largest_micro_batch_button(page: Page, client: TestClient) -> None:
    page.open("?model=Llama-3.1-8B&method=qlora&seq_len=4096")
    body = {"model": "Llama-3.1-8B", "method": "qlora", "seq_len": 4096}
    response = client.post("/api/estimate", params={"max": "micro_batch"}, json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    value = answer["max"]["value"]
    button = page.page.get_by_role(
        "button", name="Largest micro-batch that fits on H100 SXM 80GB", exact=True
    )
    assert visible_text(button) == "Largest that fits on H100 SXM 80GB"
    before = page.renders()
    button.focus()
    page.page.keyboard.press("Enter")  # from the keyboard alone
    page.wait_render(before)
    micro = page.page.get_by_role("textbox", name="Micro-batch", exact=True)
    assert micro.input_value() == str(value)
    assert page.text("#total") == gib(answer["memory"]["per_gpu"]["total_bytes"])
    assert_shows(page, api(client, {**body, "micro_batch": value}))
    status = page.text("#largest-micro-batch-status")
    found = answer["max"]
    assert status.startswith(
        f"Largest micro-batch that fits on H100 SXM 80GB with 5% of its memory free: {value} ("
    )
    if found["exact"] != value:
        assert f"the limit is {found['exact']}, rounded down to a multiple of {found['multiple']}" in status
    assert parse_qs(urlsplit(page.page.url).query)["micro_batch"] == [str(value)]
    # another GPU: the label follows it, and the old answer is cleared
    before = page.renders()
    page.page.get_by_role("combobox", name="GPU type", exact=True).select_option("GeForce RTX 4090")
    page.wait_render(before)
    assert page.text("#largest-micro-batch-status") == ""
    assert visible_text(page.page.locator("#largest-seq-len")) == "Largest that fits on GeForce RTX 4090"


def test_largest_when_nothing_fits_at_phone_width(browser: Any, live_server: str) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone = Page(context.new_page(), live_server)
    phone.open("?model=Llama-3.1-70B&method=full")
    phone.page.get_by_role("button", name="Largest sequence length that fits on H100 SXM 80GB").tap()
    phone.page.wait_for_selector('.largest[data-largest="seq_len"][data-state="error"]')
    status = phone.text("#largest-seq-len-status")
    assert status.startswith("Not even a sequence length of 1 fits on H100 SXM 80GB (")
    assert "try LoRA or QLoRA" in status
    assert phone.page.get_by_role("textbox", name="Sequence length", exact=True).input_value() == "2048"
    overflow = phone.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    assert not phone.errors
    context.close()


def test_quotes_behind_the_price(page: Page, client: TestClient) -> None:
    page.open()
    quotes = page.page.locator("#price-quotes")
    quotes.wait_for(state="visible")
    data = client.get("/api/prices", params={"gpu": "H100 SXM 80GB"}).json()["prices"][0]
    page.page.locator("#price-quotes > summary").click()
    rows = page.page.locator("#price-table tbody tr")
    assert rows.count() == len(data["quotes"])
    assert f"median of {data['quotes_in_median']} on-demand quotes" in page.text("#price-basis")
    first = data["quotes"][0]
    assert first["provider"] in rows.nth(0).inner_text() and first["offering"] in rows.nth(0).inner_text()
    # your own rate: no catalog price, so no quotes
    before = page.renders()
    rate = page.page.get_by_role("textbox", name="Your rate, USD per GPU-hour", exact=True)
    rate.fill("2")
    rate.press("Enter")
    page.wait_render(before)
    assert quotes.is_hidden()


def test_an_unknown_model_is_reported_once(page: Page) -> None:
    page.page.goto(f"{page.base}/?model=Llama-3.1-8X")
    page.page.wait_for_selector("body[data-state=error]")
    page.page.wait_for_selector("#controls fieldset")
    body = page.page.locator("body").inner_text()
    assert body.count("unknown model 'Llama-3.1-8X'") == 1
    assert body.count("Did you mean") == 1
    assert page.page.locator("#error").is_hidden()
    slot = page.page.locator('[data-field="model"] .field-error')
    assert "Llama-3.1-8B" in slot.get_by_role("button").all_inner_texts()
    before = page.renders()
    slot.get_by_role("button", name="Llama-3.1-8B").click()
    page.wait_render(before)
    assert page.page.get_by_role("combobox", name="Model", exact=True).input_value() == "Llama-3.1-8B"


@pytest.mark.parametrize("key", ["Enter", "Tab"])
def test_a_cleared_model_box_asks_for_a_model(page: Page, key: str) -> None:
    """Clearing the model and pressing Enter or Tab is an explicit 'choose a model' state: no
    silent switch to another catalog model, and no figures left from the old one."""
    page.open("?model=GPT-2")
    box = page.page.get_by_role("combobox", name="Model", exact=True)
    box.fill("")
    box.press(key)
    page.page.wait_for_selector("body[data-state=choose-model]")
    assert page.text("#summary") == "Choose a model to see the estimate"
    assert "choose a model" in page.text('[data-field="model"] .field-error')
    assert page.page.locator("#results").evaluate("el => el.classList.contains('stale')")
    assert box.input_value() == ""
    before = page.renders()
    box.fill("Qwen2.5-0.5B")
    box.press("Enter")
    page.wait_render(before)
    assert page.page.locator('[data-field="model"] .field-error').inner_text() == ""


@pytest.mark.parametrize("width", [1366, 390])
def test_gpu_names_in_the_fit_grid_are_whole(browser: Any, live_server: str, width: int) -> None:
    """Every GPU's name in the fit grid is shown whole, wrapped where it is long ("GB200 (per
    Blackwell GPU, NVL72)" was cut to an ellipsis), at a laptop's and at a phone's width."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    view = Page(context.new_page(), live_server)
    view.open()
    cut = view.page.evaluate(
        "() => [...document.querySelectorAll('#fit .gpu-name')]"
        ".filter(b => b.scrollWidth > b.clientWidth + 1 || b.getBoundingClientRect().right > innerWidth)"
        ".map(b => b.textContent)"
    )
    names = view.page.locator("#fit .gpu-name").all_inner_texts()
    assert "GB200 (per Blackwell GPU, NVL72)" in names and cut == []
    assert not view.errors
    context.close()


def test_the_plan_table_fits_a_laptop_window(browser: Any, live_server: str) -> None:
    """At 1440 px the plan table needs no sideways scrolling, every column shown (Offload, kWh and
    "Use this plan" were cut before), with any method and the longest GPU names in it."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    wide = Page(context.new_page(), live_server)
    wide.open("?model=Llama-3.1-8B")
    wide.page.locator("#planner > summary").click()
    wide.page.get_by_role("radio", name="Any method").check()
    wide.page.get_by_role("textbox", name="Max GPUs", exact=True).fill("16")
    wide.page.get_by_role("combobox", name="Objective").select_option("time")
    wide.page.get_by_role("button", name="Plan", exact=True).click()
    wide.page.wait_for_selector("body[data-plan=ready]")
    scroll = wide.page.evaluate(
        "() => { const box = document.querySelector('#plan-table').closest('.table-scroll');"
        " return [box.scrollWidth, box.clientWidth]; }"
    )
    assert scroll[0] <= scroll[1], scroll
    columns = wide.page.locator("#plan-table thead th").count()
    assert columns == wide.page.locator('#plan-table tbody tr[data-plan="0"] > *').count() == 10
    assert wide.page.locator('#plan-table tr[data-plan="0"] .use-plan').is_visible()
    # the fastest plan of a small job takes the most GPUs allowed
    assert wide.page.locator('#plan-table tr[data-plan="0"] .plan-hw').inner_text().startswith("16 × ")
    assert not wide.errors
    context.close()


def test_the_fixed_time_per_run_is_on_the_time_and_cost_cards(page: Page, client: TestClient) -> None:
    """The time and cost cards show the whole run (training steps plus launch, loading and
    checkpoint writes), and say what the fixed part is."""
    page.open("?model=Llama-3.1-8B&train_tokens=1e8")
    data = api(client, {"model": "Llama-3.1-8B", "train_tokens": 1e8})
    assert_shows(page, data)
    time_card = page.page.locator('[data-card="time"]')
    assert time_card.locator(".big").inner_text() == data["display"]["duration"]
    assert data["display"]["fixed"] in time_card.locator(".muted").inner_text()
    cost_card = page.page.locator('[data-card="cost"]')
    assert cost_card.locator(".big").inner_text() == data["display"]["usd"]
    assert f"{data['display']['fixed_usd']} of it fixed per run" in cost_card.locator(".muted").inner_text()


def test_phone_width_after_a_pareto_plan(browser: Any, live_server: str) -> None:
    """After a plan, with the Pareto table open, the page still does not scroll sideways."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    phone = Page(context.new_page(), live_server)
    phone.open("?model=Qwen2.5-0.5B")
    phone.page.locator("#planner > summary").click()
    phone.page.get_by_role("textbox", name="Max GPUs", exact=True).fill("8")
    phone.page.get_by_role("combobox", name="Objective").select_option("pareto")
    phone.page.get_by_role("button", name="Plan", exact=True).click()
    phone.page.wait_for_selector("body[data-plan=ready]")
    phone.page.evaluate("document.getElementById('plan-pareto').open = true")
    overflow = phone.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0
    # each plan's time and cost are on screen without scrolling the table sideways
    right_edges = phone.page.evaluate(
        """() => [...document.querySelectorAll('#plan-table tbody tr')].map(row => Math.max(
            ...[...row.querySelectorAll('td, th')].map(cell => cell.getBoundingClientRect().right)))"""
    )
    assert right_edges and max(right_edges) <= 390  # every figure of every plan, not only some
    assert not phone.errors
    context.close()


def test_the_budget_sits_with_the_figures_it_drives(page: Page, client: TestClient) -> None:
    page.open("?model=GPT-2&method=full")
    section = page.page.locator("section[aria-labelledby=run-title]")
    tokens = section.get_by_role("textbox", name="Training tokens", exact=True)
    assert tokens.is_visible()  # in the time-and-cost section, not at the bottom of the form
    assert (
        page.page.locator("#controls").get_by_role("textbox", name="Training tokens", exact=True).count() == 0
    )
    data = api(client, {"model": "GPT-2", "method": "full"})
    assert data["display"]["budget"] == "2.00B tokens"  # the default budget, stated
    assert f"{data['display']['duration']} for 2.00B tokens" in page.text("#summary")
    before = page.renders()
    tokens.fill("5e8")
    page.wait_render(before)
    smaller = api(client, {"model": "GPT-2", "method": "full", "train_tokens": 5e8})
    assert f"{smaller['display']['duration']} for 500M tokens" in page.text("#summary")


def test_plans_with_the_same_time_and_cost_say_what_differs(page: Page) -> None:
    page.open("?model=Llama-3.1-8B")
    page.page.locator("#planner > summary").click()
    page.page.get_by_role("button", name="Plan", exact=True).click()
    page.page.wait_for_selector("body[data-plan=ready]")
    rows = page.page.locator("#plan-table tbody tr")
    seen: dict[tuple[str, ...], int] = {}
    duplicates = 0
    for index in range(rows.count()):
        row = rows.nth(index)
        figures = (
            row.locator('[data-col="time"]').inner_text(),
            row.locator('[data-col="cost"]').inner_text(),
        )
        note = rows.nth(index).locator(".plan-differs")
        if figures in seen:
            duplicates += 1
            text = note.inner_text()
            assert text.startswith(f"same time and cost as #{seen[figures] + 1}; differs in ")
            assert any(word in text for word in ("ZeRO stage", "offload", "checkpointing", "micro-batch"))
        else:
            seen[figures] = index
            assert note.count() == 0
    assert duplicates >= 1  # this scenario has LoRA plans that differ only in ZeRO and offload


def test_the_fields_follow_the_model_family(page: Page, client: TestClient) -> None:
    page.open("?model=FLUX.1-dev&method=lora&resolution=512")
    page.page.wait_for_selector("body[data-kind=diffusion]")
    data = api(client, {"model": "FLUX.1-dev", "method": "lora", "resolution": 512})
    assert_shows(page, data)
    # the sample fields appear; the sequence length is derived (shown in the batch line), not asked
    assert page.page.get_by_role("textbox", name="Resolution (px or WxH)", exact=True).is_visible()
    assert not page.page.get_by_role("textbox", name="Sequence length", exact=True).is_visible()
    assert "1,024 tokens + 512 text" in page.text("#batch-line")
    throughput = page.page.locator('[data-card="throughput"] .big').inner_text()
    assert throughput.endswith("images/s")
    assert not page.errors

    before = page.renders()
    page.page.get_by_role("textbox", name="Resolution (px or WxH)", exact=True).fill("1024")
    page.wait_render(before)
    assert_shows(page, api(client, {"model": "FLUX.1-dev", "method": "lora", "resolution": 1024}))

    # a language model hides them again
    page.open("?model=Llama-3.1-8B")
    page.page.wait_for_selector("body[data-kind=llm]")
    assert page.page.get_by_role("textbox", name="Sequence length", exact=True).is_visible()
    assert not page.page.get_by_role("textbox", name="Resolution (px or WxH)", exact=True).is_visible()


def test_the_form_draws_the_field_tables_words(page: Page, client: TestClient) -> None:
    """Labels, choice names, placeholders and budget modes on the page are /api/fields' own."""
    meta = client.get("/api/fields").json()
    served = {field["name"]: field for field in meta["fields"]}
    page.open("?model=Llama-3.1-8B")
    shown = page.page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('[data-field]')].map(node => {
            const label = node.querySelector(':scope > label, :scope .check, :scope span.label');
            if (!label) return [node.dataset.field, null];
            const copy = label.cloneNode(true);
            copy.querySelectorAll('.flag').forEach(flag => flag.remove());
            return [node.dataset.field, copy.textContent.trim()];
        }))"""
    )
    drawn = {name for name, field in served.items() if "web" in field["interfaces"]}
    assert set(shown) == drawn
    for name, text in shown.items():
        assert text == served[name]["label"], name
    methods = page.page.locator('[data-field="method"] .segmented span').all_inner_texts()
    assert methods == ["Full", "LoRA", "QLoRA"]
    modes = page.page.locator("#run-budget .segmented span").all_inner_texts()
    assert modes == [mode["label"] for mode in meta["budget_modes"]] == ["Tokens", "Dataset", "Steps"]
    assert page.page.locator("#f-train_tokens").get_attribute("placeholder") == "2e9 (default)"
    assert page.page.locator("#f-mfu").get_attribute("placeholder") == "trainplan's own model"
    # switching to steps hides the token budget and shows the steps, as their `budget` says
    page.page.locator("label:has(#budget-steps)").click()
    assert page.page.locator('[data-field="steps"]').is_visible()
    assert not page.page.locator('[data-field="train_tokens"]').is_visible()
    assert page.page.locator('[data-field="epochs"]').is_hidden()
    assert not page.errors


def test_the_api_docs_page_runs_under_its_policy(page: Page) -> None:
    """/docs renders every operation with its Content-Security-Policy in force: its one inline
    script runs by hash, and the browser logs no refusal (the fixture fails on any error)."""
    page.page.goto(f"{page.base}/docs")
    page.page.wait_for_selector(".opblock-summary-path", timeout=20_000)
    paths = page.page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/api/estimate", "/api/plan", "/api/config"} <= {path.strip() for path in paths}


@pytest.mark.parametrize(
    ("model", "recipe"),
    [("Llama-3.1-8B", "torchtune"), ("Llama-3.1-8B", "unsloth"), ("FLUX.1-dev", "diffusers")],
)
def test_a_recipe_on_the_page_is_the_recipe_of_its_link_and_command(
    page: Page, client: TestClient, model: str, recipe: str
) -> None:
    """Picking a framework recipe changes the page's estimate exactly as its share link and its
    command apply it: the page left every default-valued control out of its request only after
    this was fixed (it sent them, so a recipe filled nothing on the page)."""
    import shlex

    from typer.testing import CliRunner

    from trainplan.interfaces.cli.main import app

    page.open(f"?model={model}")
    before = page.renders()
    page.page.get_by_role("combobox", name="Framework recipe", exact=True).select_option(recipe)
    page.wait_render(before)
    query = {key: values[0] for key, values in parse_qs(urlsplit(page.page.url).query).items()}
    assert query["recipe"] == recipe
    linked = api(client, query)
    assert_shows(page, linked)  # the page's figures are its link's, its command included
    command = shlex.split(page.page.locator("#cli-command").input_value())
    assert command[:2] == ["trainplan", "estimate"] and "--recipe" in command
    ran = CliRunner().invoke(app, [*command[1:], "--json"], catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    assert (
        json.loads(ran.output)["memory"]["per_gpu"]["total_bytes"]
        == linked["memory"]["per_gpu"]["total_bytes"]
    )
    plain = api(client, {"model": model})
    assert linked["memory"]["per_gpu"]["total_bytes"] != plain["memory"]["per_gpu"]["total_bytes"]
    # the controls the recipe fills show its values, marked as the recipe's (they showed
    # trainplan's defaults while the figures were the recipe's); without it, the form's own again
    filled = linked["assumptions"]["recipe"]["defaults"]
    assert filled
    for name, value in filled.items():
        wrapper = page.page.locator(f'[data-field="{name}"]')
        assert wrapper.get_attribute("data-recipe") == recipe, name
        assert shown_value(page, name) == as_text(value), name
        # text_content: a field in the closed "More assumptions" section shows no inner text
        assert (wrapper.locator(".from-recipe").text_content() or "").startswith(f"from the {recipe} recipe")
    before = page.renders()
    page.page.get_by_role("combobox", name="Framework recipe", exact=True).select_option("")
    page.wait_render(before)
    defaults = {field["name"]: field["default"] for field in client.get("/api/fields").json()["fields"]}
    for name in filled:
        assert page.page.locator(f'[data-field="{name}"]').get_attribute("data-recipe") is None
        assert shown_value(page, name) == as_text(defaults[name]), name
    assert page.page.locator(".from-recipe").count() == 0
    assert_shows(page, plain)
    # a share link that names the recipe opens with its values shown
    page.open(f"?model={model}&recipe={recipe}")
    for name, value in filled.items():
        assert shown_value(page, name) == as_text(value), name


def as_text(value: Any) -> str:
    """A value as the page's controls hold it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def shown_value(page: Page, name: str) -> str:
    """The value a field's control shows: its checked radio, its checkbox, else its select or box."""
    value: str = page.page.evaluate(
        """name => {
          const wrapper = document.querySelector(`[data-field="${name}"]`);
          const radio = wrapper.querySelector("input[type=radio]:checked");
          if (radio) return radio.value;
          const box = wrapper.querySelector("input[type=checkbox]");
          if (box) return box.checked ? "true" : "false";
          return wrapper.querySelector("select, input").value;
        }""",
        name,
    )
    return value


def test_a_model_of_another_kind_switches_the_form_at_once(page: Page, client: TestClient) -> None:
    """Picking a diffusion model after a language model shows its fields and hides the others
    without a reload, and a kind-specific value typed for one model is cleared for the next
    (a FLUX resolution carried over to V-JEPA 2 made it fail with "give frames per clip")."""

    def pick(name: str) -> None:
        before = page.renders()
        model = page.page.get_by_role("combobox", name="Model", exact=True)
        model.fill(name)
        model.press("Enter")
        page.wait_render(before)

    page.open()
    sequence = page.page.locator('[data-field="seq_len"]')
    resolution = page.page.locator('[data-field="resolution"]')
    assert sequence.is_visible() and not resolution.is_visible()
    pick("FLUX.1-dev")
    assert not sequence.is_visible() and resolution.is_visible()
    before = page.renders()
    page.page.get_by_role("textbox", name="Resolution (px or WxH)", exact=True).fill("512")
    page.wait_render(before)
    assert page.text("#total") == api(client, {"model": "FLUX.1-dev", "resolution": 512})["display"]["total"]
    pick("V-JEPA-2-ViT-L")
    assert page.page.get_by_role("textbox", name="Resolution (px or WxH)", exact=True).input_value() == ""
    query = parse_qs(urlsplit(page.page.url).query)
    assert "resolution" not in query
    # a JEPA is pretrained in full (its published recipes), so the form opens it so, stated
    assert page.page.get_by_role("radio", name="Full", exact=True).is_checked()
    assert query["method"] == ["full"]
    vjepa = api(client, {"model": "V-JEPA-2-ViT-L", "method": "full"})
    assert_shows(page, vjepa)
    assert "--method full" in vjepa["display"]["cli"]
    # the step table names a share that rounds to nothing 0%, never -0%
    shares = page.page.locator("#step-table tbody td").all_inner_texts()
    assert shares and not any("-0%" in cell for cell in shares)
    pick("Llama-3.1-8B")
    assert sequence.is_visible() and not resolution.is_visible()
    assert page.page.get_by_role("radio", name="LoRA", exact=True).is_checked()
    assert_shows(page, api(client, {"model": "Llama-3.1-8B"}))
    # a method someone chose stays through a change of kind
    page.page.get_by_role("radio", name="QLoRA", exact=True).check()
    pick("V-JEPA-2-ViT-L")
    assert page.page.get_by_role("radio", name="QLoRA", exact=True).is_checked()


# A scripted user: each step changes one control to a value it does not hold, chosen by a
# seeded generator; the choices are valid for every model in the list (what a user may do).
SEQUENCE_MODELS = ("Llama-3.1-8B", "Qwen2.5-0.5B", "FLUX.1-dev", "Llama-3.2-1B")
SEQUENCE_CHOICES: dict[str, tuple[str, ...]] = {
    "Framework recipe": ("", "torchtune", "unsloth", "hf-trainer", "axolotl", "diffusers"),
    "GPU type": ("H100 SXM 80GB", "GeForce RTX 4090", "A100 80GB SXM4", "L40S"),
    "Training precision": ("bf16-mixed", "bf16"),
    "Activation checkpointing": ("none", "full", "selective"),
}


def _sequence_step(page: Page, rng: Any) -> str:
    """Change one control (never to the value it shows) and wait for the page's answer."""
    before = page.renders()
    kind = rng.choice(["model", "method", "micro_batch", *SEQUENCE_CHOICES])
    if kind == "model":
        box = page.page.get_by_role("combobox", name="Model", exact=True)
        name = rng.choice([m for m in SEQUENCE_MODELS if m != box.input_value()])
        box.fill(name)
        box.press("Enter")
        done = f"model {name}"
    elif kind == "method":
        checked = page.page.locator('[data-field="method"] input:checked').input_value()
        method = rng.choice([m for m in ("full", "lora", "qlora") if m != checked])
        page.page.locator(f'[data-field="method"] input[value="{method}"]').check()
        done = f"method {method}"
    elif kind == "micro_batch":
        box = page.page.get_by_role("textbox", name="Micro-batch", exact=True)
        value = rng.choice([v for v in ("1", "2", "3", "4") if v != box.input_value()])
        box.fill(value)
        done = f"micro_batch {value}"
    else:
        select = page.page.get_by_role("combobox", name=kind, exact=True)
        value = rng.choice([v for v in SEQUENCE_CHOICES[kind] if v != select.input_value()])
        select.select_option(value)
        done = f"{kind} {value or '(none)'}"
    page.page.wait_for_function(
        "n => Number(document.body.dataset.renders || 0) > n || document.body.dataset.state === 'error'",
        arg=before,
    )
    return done


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_page_equals_its_own_command_after_any_sequence_of_changes(
    page: Page, client: TestClient, seed: int
) -> None:
    """After every step of a seeded sequence of changes (model of another kind, recipe, method,
    micro-batch, GPU, precision, checkpointing), the page's figures are those its share link
    gives the API and its own `trainplan estimate` command gives the CLI; where the scenario is
    refused, the command refuses it too."""
    import random
    import shlex

    from typer.testing import CliRunner

    from trainplan.interfaces.cli.main import app

    rng = random.Random(seed)
    page.open()
    steps = []
    for _ in range(10):
        steps.append(_sequence_step(page, rng))
        page.page.wait_for_function(
            "() => ['ready', 'error'].includes(document.body.dataset.state)"
            " && document.body.dataset.chart === document.body.dataset.renders"
        )
        query = {key: values[0] for key, values in parse_qs(urlsplit(page.page.url).query).items()}
        linked = client.post("/api/estimate", json=query)
        if page.page.evaluate("document.body.dataset.state") == "error":
            assert linked.status_code == 422, (steps, linked.text)
            continue
        assert linked.status_code == 200, (steps, linked.text)
        data = linked.json()
        assert page.text("#total") == data["display"]["total"], steps
        assert_shows(page, data)
        command = shlex.split(page.page.locator("#cli-command").input_value())
        ran = CliRunner().invoke(app, [*command[1:], "--json"], catch_exceptions=False)
        assert ran.exit_code == 0, (steps, ran.output)
        assert (
            json.loads(ran.output)["memory"]["per_gpu"]["total_bytes"]
            == (data["memory"]["per_gpu"]["total_bytes"])
        ), steps


def test_the_reference_fields_follow_the_stage(page: Page, client: TestClient) -> None:
    """A full DPO fine-tune keeps a frozen reference copy: the page says its share of the weights
    (the API's memory.states.reference_bytes); the reference fields show for dpo and kto only, and
    a stage without a reference hides them and drops their value from the request."""
    page.open("?model=Llama-3.1-8B&method=full&stage=dpo&reference=model")
    body = {"model": "Llama-3.1-8B", "method": "full", "stage": "dpo", "reference": "model"}
    data = api(client, body)
    assert_shows(page, data)
    copy = data["memory"]["states"]["reference_bytes"]
    assert copy == 8_030_261_248 * 2  # every parameter, bf16 (bf16-mixed keeps 16-bit weights)
    assert page.text("#reference-note") == (
        f"Of the weights, the frozen reference model takes {gib(copy)} per GPU: "
        "DPO scores each batch with it too."
    )
    reference = page.page.get_by_role("combobox", name="Reference log-probs", exact=True)
    assert reference.is_visible()
    before = page.renders()
    page.page.get_by_role("combobox", name="Training stage", exact=True).select_option("orpo")
    page.wait_render(before)
    assert not reference.is_visible()
    assert page.page.locator("#reference-note").is_hidden()
    assert_shows(page, api(client, {"model": "Llama-3.1-8B", "method": "full", "stage": "orpo"}))


def test_the_rollout_fields_follow_the_stage(page: Page, client: TestClient) -> None:
    """GRPO's rollout section shows for grpo only; a colocated vLLM engine's budget and rounds are
    said under the breakdown as the CLI says them (display.rollout_lines), the chart gains the
    generation and scoring bars, and leaving grpo hides the section and drops its values."""
    query = "?model=Qwen2.5-1.5B&stage=grpo&rollout_engine=vllm&micro_batch=8&grad_accum=1&seq_len=1024"
    page.open(query)
    body = {
        "model": "Qwen2.5-1.5B",
        "stage": "grpo",
        "rollout_engine": "vllm",
        "micro_batch": 8,
        "grad_accum": 1,
        "seq_len": 1024,
    }
    data = api(client, body)
    assert_shows(page, data)
    assert list(data["memory"]["phases"])[:2] == ["generation", "scoring"]
    lines = data["display"]["rollout_lines"]
    assert lines[0].startswith("Rollout: vLLM colocated") and lines[1].startswith("Rounds: ")
    assert page.text("#rollout-note") == ". ".join(lines)
    # the engine's bar is drawn with the others, one per moment, generation and scoring first
    series = chart_data(page)
    assert len(series) == len(data["memory"]["per_gpu"]["kinds"])
    engine = list(data["memory"]["per_gpu"]["kinds"]).index("rollout")
    budget = data["memory"]["rollout"]["engine_memory"]["budget_bytes"]
    assert series[engine] == pytest.approx([budget / GIB] * len(data["memory"]["phases"]))
    section = page.page.locator('[data-section="rollout"]')
    assert section.is_visible()
    engine = page.page.get_by_role("combobox", name="Rollout engine", exact=True)
    assert engine.is_visible()
    before = page.renders()
    page.page.get_by_role("combobox", name="Training stage", exact=True).select_option("sft")
    page.wait_render(before)
    assert section.is_hidden()
    assert page.page.locator("#rollout-note").is_hidden()
    body = {"model": "Qwen2.5-1.5B", "micro_batch": 8, "grad_accum": 1, "seq_len": 1024}
    assert_shows(page, api(client, body))


def test_ppo_shows_its_own_rollout_fields(page: Page, client: TestClient) -> None:
    """PPO's rollout section shows the fields PPOTrainer reads (completion length, passes,
    forward batch) and not GRPO's (generations, the engine's); the note says the kept logits and
    the value and reward models as the CLI says them."""
    body = {"model": "Qwen2.5-0.5B", "stage": "ppo", "micro_batch": 4, "grad_accum": 4, "seq_len": 512}
    page.open("?" + "&".join(f"{name}={value}" for name, value in body.items()))
    data = api(client, body)
    assert_shows(page, data)
    lines = data["display"]["rollout_lines"]
    assert lines[0].startswith("Rollout: transformers' generate on the policy, 16 prompts at a time")
    assert lines[2].startswith("Value model (Qwen2.5-0.5B, one-score head) on each GPU")
    assert page.text("#rollout-note") == ". ".join(lines)
    shown = {
        name: page.page.locator(f'[data-field="{name}"]').is_visible()
        for name in (
            "completion_len",
            "num_iterations",
            "rollout_forward_batch",
            "generations",
            "rollout_engine",
        )
    }
    assert shown == {
        "completion_len": True,
        "num_iterations": True,
        "rollout_forward_batch": True,
        "generations": False,
        "rollout_engine": False,
    }


def test_the_page_says_each_pipeline_ranks_peak(page: Page, client: TestClient) -> None:
    """Under pipeline parallelism the page says every rank's peak under the breakdown, as the
    CLI says it (display.stage_line, from memory.per_stage); without it the note is hidden."""
    body = {
        "model": "Llama-3.1-8B",
        "gpus": 16,
        "tensor_parallel": 2,
        "pipeline_parallel": 4,
        "grad_accum": 16,
        "seq_len": 8192,
        "activation_checkpointing": "none",
    }
    page.open("?" + "&".join(f"{name}={value}" for name, value in body.items()))
    data = api(client, body)
    assert_shows(page, data)
    line = data["display"]["stage_line"]
    assert line.startswith("Pipeline stages, each rank's peak: stage 0")
    assert len(data["memory"]["per_stage"]) == 4
    assert page.text("#stage-note") == f"{line}."
    page.open("?model=Llama-3.1-8B")
    assert page.page.locator("#stage-note").is_hidden()
