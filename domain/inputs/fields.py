"""A mode's input as users give it, and what each entrypoint calls it.

The CLI calls an input by its flag (`--pose-video`), the HTTP API by its file field
(`pose_video`); a refusal about an input (`InputRefusal`) names it as the entrypoint that asked
calls it, composed from these names, never rewritten from another's text.
"""

from __future__ import annotations

import enum
import attrs

from wanjax.domain.errors import InvalidRequestError
from wanjax.domain.inputs.kinds import InputKind


class Entrypoint(enum.Enum):
    """Who asked: the command line or the HTTP API."""

    CLI = "cli"
    HTTP = "http"


@attrs.frozen(kw_only=True)
class InputField:
    """One input of a mode.

    name: its name in the request's `inputs`; flag: the CLI's flag (`--image`); http: the HTTP
    API's file field, None where only the CLI takes it; kind: how its file is read and what its
    value holds; help: the CLI's help, for this mode."""

    name: str
    flag: str
    kind: InputKind
    help: str
    http: str | None = None

    @property
    def repeatable(self) -> bool:
        return self.kind.repeatable

    def called(self, entrypoint: Entrypoint) -> str:
        """What `entrypoint` calls this input: its flag, its HTTP field, or, over HTTP for an input
        the HTTP API does not take, its flag and where it is taken."""
        if entrypoint is Entrypoint.CLI:
            return self.flag
        return self.http or f"{self.flag} (taken by `wanjax generate` only)"

    def taken_by(self, entrypoint: Entrypoint) -> bool:
        return entrypoint is Entrypoint.CLI or self.http is not None


class InputRefusal(InvalidRequestError):
    """A refusal that names inputs: `template` with a `{name}` per input, each filled with what the
    entrypoint that asked calls it (`named`); as text (`str`), with the CLI's names."""

    def __init__(self, template: str, **inputs: InputField) -> None:
        self.template, self.inputs = template, inputs
        super().__init__(self.named(Entrypoint.CLI))

    def named(self, entrypoint: Entrypoint) -> str:
        return self.template.format(**{key: field.called(entrypoint) for key, field in self.inputs.items()})


def named_for(error: Exception, entrypoint: Entrypoint) -> str:
    """The message of `error` in `entrypoint`'s terms (an InputRefusal's inputs named as it calls them)."""
    return error.named(entrypoint) if isinstance(error, InputRefusal) else str(error)

