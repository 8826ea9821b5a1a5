"""The local edge: the `laya-serverless` CLI, the uvicorn server, `start-api` (API Gateway events
for the real handler, like `sam local start-api`) and the local jobs engine."""
