"""docs/configuration.md, rendered from the declarations: the runtime's variables and the stack's `-c` flags.

    PYTHONPATH=infra python -m laya_infra.reference > docs/configuration.md

(kept current by tests/unit/laya_serverless/test_configuration.py)
"""

from __future__ import annotations

from laya_serverless import settings as runtime
from laya_serverless.configuration import Field, declared

from .config import DeployConfig
from .gpu_config import gpu_fields

HEADER = """# Configuration reference

Generated from the declarations in `functions/laya_serverless/settings.py` (the runtime) and
`infra/laya_infra/config.py` (the CDK app) by `PYTHONPATH=infra python -m laya_infra.reference`; a test keeps it whole.
A value that breaks its rule is refused at start in one line naming the variable or flag, except where the
table says *tolerated*: there upstream `laya-serve` reads the same variable and a bad value means the default.
A `LAYA_*` variable or a `-c` key that is not in these tables is refused too, naming the nearest declared one.
Booleans take `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (any case); a blank value means the default.
"""


def _default(field: Field) -> str:
    if field.shown_default is not None:
        return field.shown_default
    if field.default is None:
        return "unset"
    if isinstance(field.default, bool):
        return "true" if field.default else "false"
    return str(field.default) if str(field.default) else "empty"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    lines = [HEADER, "## Runtime variables", "",
             "| variable | `-c` flag | type | default | bad value | what |", "|---|---|---|---|---|---|"]
    for field in list(runtime.fields().values()) + list(runtime.OTHER_FUNCTIONS):
        lines.append("| `%s` | %s | %s | %s | %s | %s |" % (
            field.env, "`%s`" % field.context if field.context else "", _cell(field.parse.describe()),
            _cell(_default(field)), "tolerated" if field.tolerant else "refused", _cell(field.doc)))
    lines += ["", "## CDK context flags (`-c key=value`)", "",
              "Flags that set a runtime variable are listed above with it.", "",
              "| flag | type | default | what |", "|---|---|---|---|"]
    for field in [*declared(DeployConfig).values(), *gpu_fields()]:
        if field.env is None:
            lines.append("| `%s` | %s | %s | %s |" % (field.context, _cell(field.parse.describe()),
                                                      _cell(_default(field)), _cell(field.doc)))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
