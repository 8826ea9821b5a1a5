"""schemathesis against the app's own OpenAPI document (`/openapi.json`, with the request bodies of
`http/openapi_bodies.py`): every operation, in its positive mode (bodies as the schema describes them) and
its negative mode (bodies and parameters that break it), called in process through the ASGI app.
The property is the hostile tier's: never a 5xx, and every 4xx carries a JSON `detail`.

Bounded and repeatable like test_hostile.py: `EXAMPLES` per operation and mode, derandomized, no
example database. The jobs routes run against a real JobService on a local store whose engine never
starts a job, so a run writes jobs (and their shards) but answers nothing; `/v1/jobs/{job_id}` reads
them back. docs/operations.md has the counts.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode

from laya_serverless.artifact.store import LocalStore
from laya_serverless.http.app import create_app
from laya_serverless.jobs.job_service import JobService
from laya_serverless.protocol.routing import Registry
from laya_serverless.settings import Settings
from tests.functional.laya_serverless.http.test_app_fast import fake_decider
from tests.functional.laya_serverless.lambda_edge.test_hostile import BOUNDED, _check, _IdleEngine

pytestmark = pytest.mark.usefixtures("ieee_floats")
EXAMPLES = 60
AUTH = {"Authorization": "Bearer k3y"}
OPERATIONS = ["POST /v1/jobs", "GET /v1/jobs/{job_id}", "GET /v1/jobs/{job_id}/results", "POST /v1/systemone",
              "POST /v1/systemone/batch", "GET /health", "GET /v1/models"]


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = LocalStore(tmp_path_factory.mktemp("schemathesis-jobs"))
    store.create("jobs/input/good.jsonl", b'"a"\n{"b": 1}\n')
    chosen = Settings.of(api_key="k3y", jobs_max_states=50)
    app = create_app({"english": fake_decider([1.5, 0.5, 0.25, 2.0])}, chosen, registry=Registry(),
                     jobs=JobService(store, _IdleEngine(), chosen.jobs, chosen.protocol, chosen.limits))
    # With a key set the app hides /openapi.json (as upstream does), so the document is read from the app
    # object; the calls go to the app in process, as schemathesis.openapi.from_asgi attaches it.
    loaded = schemathesis.openapi.from_dict(app.openapi())
    loaded.app = app
    return loaded


def test_the_document_describes_every_body(schema: Any) -> None:
    """Without the bodies schemathesis would send empty POSTs only: the run would prove nothing of them."""
    for label in ("POST /v1/jobs", "POST /v1/systemone", "POST /v1/systemone/batch"):
        operation = schema.find_operation_by_label(label)
        assert operation is not None and operation.body, label
    assert {label for label in OPERATIONS if schema.find_operation_by_label(label) is None} == set()


# Negative cases need something a schema constrains: the GET routes take only free strings (a path id, the
# optional Authorization header), which nothing can violate, so they run positive only.
RUNS = [(label, GenerationMode.POSITIVE) for label in OPERATIONS] + [
    (label, GenerationMode.NEGATIVE) for label in OPERATIONS if label.startswith("POST")]


@pytest.mark.parametrize(("label", "mode"), RUNS, ids=["%s-%s" % (label, mode.value) for label, mode in RUNS])
def test_schemathesis_cases_never_get_a_5xx(schema: Any, label: str, mode: GenerationMode) -> None:
    operation = schema.find_operation_by_label(label)

    @settings(BOUNDED, max_examples=EXAMPLES)
    @given(case=operation.as_strategy(generation_mode=mode), keyed=st.booleans())
    def run(case: Any, keyed: bool) -> None:
        response = case.call(headers=AUTH if keyed else None)
        _check(response.status_code, response.content)

    run()
