"""docs/settings.md, rendered from ``tessera.config.Settings``: each field's environment
variable, default, allowed values and description (the field's docstring). ``make docs`` runs
``python -m tessera.cli.settings_docs docs/settings.md``; a test fails when the file differs from
what this renders, so the page cannot drift from the code.
"""

import sys
import types
import typing
from pathlib import Path

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from tessera.config import DEV_HASH_KEY, DEV_SECRET_KEYS, Settings

HEADER = """\
# Settings

<!-- Rendered from tessera.config.Settings by `make docs`; edit the field's docstring there. -->

Tessera reads these environment variables once, at start-up: the server, the job worker and the
CLI alike (see [Operations](operations.md)). Relative paths are read from the current
directory. With `TESSERA_ENV=production` the dev placeholder secrets are refused.

| Variable | Default | Allowed | Meaning |
|---|---|---|---|
"""

_KINDS: dict[object, str] = {
    int: "integer",
    float: "number",
    str: "text",
    SecretStr: "secret text",
    Path: "path",
}
_BOUNDS = (
    ("ge", "at least {}"),
    ("gt", "more than {}"),
    ("le", "at most {}"),
    ("lt", "less than {}"),
    ("min_length", "at least {} characters"),
    ("max_length", "at most {} characters"),
    ("pattern", "pattern `{}`"),
)


def render() -> str:
    """The whole page, one row per field of ``Settings`` in the class's order."""
    rows = [_row(name, field) for name, field in Settings.model_fields.items()]
    return HEADER + "".join(rows)


def _row(name: str, field: FieldInfo) -> str:
    if not field.description:
        raise ValueError(f"Settings.{name} has no docstring: docs/settings.md needs one")
    cells = (
        f"`{Settings.model_config.get('env_prefix', '')}{name.upper()}`",
        _default(field.default),
        _allowed(field),
        " ".join(field.description.split()),
    )
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n"


def _default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, SecretStr):
        placeholder = value.get_secret_value() in (DEV_SECRET_KEYS, DEV_HASH_KEY)
        return "a dev placeholder" if placeholder else "a secret"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def _allowed(field: FieldInfo) -> str:
    annotation = field.annotation
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        annotation = members[0] if len(members) == 1 else annotation
    if typing.get_origin(annotation) is typing.Literal:
        parts = [", ".join(f"`{value}`" for value in typing.get_args(annotation))]
    elif annotation is bool:
        parts = ["`true` or `false`"]
    else:
        parts = [_KINDS.get(annotation, str(annotation))]
    for constraint in field.metadata:
        for attribute, text in _BOUNDS:
            bound = getattr(constraint, attribute, None)
            if bound is not None:
                parts.append(text.format(bound))
    if optional:
        parts.append("or unset")
    return ", ".join(parts)


def main(argv: list[str]) -> None:
    """``python -m tessera.cli.settings_docs [PATH]``: write the page to PATH, else stdout."""
    page = render()
    if argv:
        Path(argv[0]).write_text(page, encoding="utf-8")
    else:
        sys.stdout.write(page)


if __name__ == "__main__":
    main(sys.argv[1:])
