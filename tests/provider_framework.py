"""The CDK Provider framework's side of an asynchronous custom resource, as its runtime does it, for the deploy gate's
tests: what CloudFormation's request becomes on its way to onEvent and to every isComplete poll.

Mirrors `custom-resources/lib/provider-framework/runtime/framework.js` of aws-cdk-lib 2.275.0 (read from the jsii
bundle the venv installs): onEvent gets the request; the resource event is the request with onEvent's answer merged
over it (a missing PhysicalResourceId is the RequestId on Create); the waiter state machine is started for every
request type, Delete included, and calls isComplete with that event until it answers IsComplete true; an answer
that is not complete but carries Data is an error; a user function's error fails the resource at once; the final
Data is onEvent's merged with isComplete's. Only AWS can show the framework's own functions and waiter doing this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def run_custom_resource(handler: Handler, request: dict[str, Any], context: Any = None,
                        polls: int = 10_000) -> tuple[dict[str, Any], int]:
    """(the response the framework sends CloudFormation, the number of isComplete calls) for one request."""
    answer = handler(dict(request, ResponseURL="..."), context) or {}
    physical_id = answer.get("PhysicalResourceId") or (
        request.get("RequestId", "request-1") if request["RequestType"] == "Create" else request["PhysicalResourceId"])
    if request["RequestType"] == "Delete" and physical_id != request.get("PhysicalResourceId"):
        raise AssertionError("DELETE: cannot change the physical resource ID")
    event = {**request, **answer, "PhysicalResourceId": physical_id}
    for poll in range(1, polls + 1):
        result = handler(dict(event, ResponseURL="..."), context)
        if not result.get("IsComplete"):
            if result.get("Data"):
                raise AssertionError('"Data" is not allowed if "IsComplete" is "False"')
            continue
        response = {**event, **result, "Data": {**(event.get("Data") or {}), **(result.get("Data") or {})}}
        return {"Status": "SUCCESS", "PhysicalResourceId": response["PhysicalResourceId"],
                "Data": response["Data"]}, poll
    raise AssertionError("Operation timed out")
