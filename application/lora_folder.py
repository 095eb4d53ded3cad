"""The LoRA files a server applies per request: by name, from the one folder it was given
(`wanjax serve --lora-dir DIR`), never from a path a client chooses."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from wanjax.domain.errors import ConfigError, InvalidRequestError
from wanjax.domain.lora import LORA_SUFFIX, MAX_LORA_SCALE, LoraSpec, check_request_loras, checked_scale
from wanjax.domain.numbers import shown

ITEM_FORM = '{"name": FILE, "scale": NUMBER}'
NAME_MAX = 255
"""The longest name of one file or folder, in bytes (Linux's NAME_MAX)."""
PATH_MAX = 4096
"""The longest path, in bytes (Linux's PATH_MAX)."""


class LoraFolder:
    """The `.safetensors` files under `root` (subfolders included), named by their path relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise ConfigError(f"--lora-dir {root}: not a folder; give the folder that holds the LoRA files")

    def listing(self) -> list[dict[str, Any]]:
        """Every LoRA file: its name (as requests give it) and size in bytes, sorted by name."""
        files = sorted(p for p in self.root.rglob(f"*{LORA_SUFFIX}") if p.is_file() and self._inside(p.resolve()))
        return [{"name": p.relative_to(self.root).as_posix(), "bytes": p.stat().st_size} for p in files]

    def specs(self, field: str, value: Any) -> tuple[LoraSpec, ...]:
        """A client's `field` (a list of {"name", "scale"} objects, at most a request's LoRAs) as
        LoraSpecs of files in this folder; an InvalidRequestError naming the field and the item otherwise."""
        if not isinstance(value, list):
            raise InvalidRequestError(f"{field}: give a list of {ITEM_FORM} objects (JSON; in multipart, one field holding it)")
        try:
            check_request_loras({field: value})  # before any file is looked for
        except ConfigError as err:
            raise InvalidRequestError(str(err)) from None
        specs = []
        for index, item in enumerate(value):
            where = f"{field}[{index}]"
            if not isinstance(item, dict) or "name" not in item or not set(item) <= {"name", "scale"}:
                raise InvalidRequestError(f"{where}={shown(item)}: give an object {ITEM_FORM} (scale optional, 1 by default)")
            try:
                scale = checked_scale(item.get("scale", 1.0), f"{where}.scale={shown(item.get('scale'))}:", limit=MAX_LORA_SCALE)
            except ConfigError as err:
                raise InvalidRequestError(str(err)) from None
            specs.append(LoraSpec(str(self._file(where, item["name"])), scale))
        return tuple(specs)

    def _file(self, where: str, name: Any) -> Path:
        listed = "GET /v1/loras lists the server's LoRAs"
        if not isinstance(name, str) or not name.endswith(LORA_SUFFIX):
            raise InvalidRequestError(f"{where}.name={shown(name)}: give the name of a {LORA_SUFFIX} file; {listed}")
        relative = PurePosixPath(name)
        too_long = len(name.encode()) > PATH_MAX or any(len(part.encode()) > NAME_MAX for part in relative.parts)
        if too_long or any(ord(character) < 32 for character in name):
            raise InvalidRequestError(f"{where}.name={shown(name)}: not a file's name (a control character, a part of "
                                      f"over {NAME_MAX} bytes or over {PATH_MAX} in all); {listed}")  # fmt: skip
        path = (self.root / relative).resolve()
        if relative.is_absolute() or ".." in relative.parts or "\\" in name or not self._inside(path):
            raise InvalidRequestError(
                f"{where}.name={shown(name)}: a path out of the server's LoRA folder; give a file's name in it ({listed})"
            )
        if not path.is_file():
            raise InvalidRequestError(f"{where}.name={shown(name)}: no such file in the server's LoRA folder; {listed}")
        return path

    def in_clients_terms(self, message: str) -> str:
        """`message` with each file of this folder named as a client names it (relative to the
        folder): a client is told nothing of the server's paths."""
        return message.replace(f"{self.root}/", "").replace(str(self.root), "the server's LoRA folder")

    def _inside(self, path: Path) -> bool:
        return path.is_relative_to(self.root)


def lora_fields(folder: LoraFolder | None, fields: dict[str, Any], names: tuple[str, ...]) -> None:
    """Replaces the client's LoRA fields `names` in `fields` by their LoraSpecs (`request_lora_specs`);
    an InvalidRequestError for a LoRA field sent item by item (the SDK's form of a list of objects,
    `loras[][name]`), which must come as one field holding JSON."""
    for key in fields:
        if key.partition("[")[0] in names and key not in names:
            field = key.partition("[")[0]
            raise InvalidRequestError(
                f"{key}: give {field} as one field holding its JSON list, e.g. {field}='[{ITEM_FORM}]' "
                f"(with the openai SDK: extra_body={{\"{field}\": json.dumps([...])}})"
            )
    fields.update({name: request_lora_specs(folder, name, fields[name]) for name in names if name in fields})


def request_lora_specs(folder: LoraFolder | None, field: str, value: Any) -> tuple[LoraSpec, ...]:
    """`folder.specs(field, value)`; without a folder, an InvalidRequestError saying how to get one."""
    if folder is None:
        raise InvalidRequestError(f"{field}: this server takes no LoRAs; start it with --lora-dir DIR to serve the LoRAs in DIR")
    return folder.specs(field, value)
