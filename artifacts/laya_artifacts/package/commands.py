"""The package stage's commands: `laya-artifacts package | aarch64-python | probe`."""

from laya_artifacts.package import aarch64_python, lambda_package, probe

COMMANDS = (lambda_package.COMMAND, aarch64_python.COMMAND, probe.COMMAND)
