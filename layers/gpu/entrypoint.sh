#!/bin/sh
# SageMaker starts the container as `docker run IMAGE serve`: serve the app on 8080 (or the port SageMaker
# names). Any other command runs as given, e.g. `docker run IMAGE python -m laya_serverless.local_edge.cli --help`.
set -eu
if [ "$#" -eq 0 ] || [ "$1" = "serve" ]; then
    if [ -n "${SAGEMAKER_BIND_TO_PORT:-}" ]; then
        export LAYA_PORT="$SAGEMAKER_BIND_TO_PORT"
    fi
    exec python -m laya_serverless.local_edge.cli serve
fi
exec "$@"
