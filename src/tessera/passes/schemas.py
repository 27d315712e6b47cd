import uuid
from typing import Literal

from pydantic import ConfigDict, Field

from tessera.schemas import CamelInput, CamelModel, SnakeModel


class DeviceRegistration(CamelInput):
    """What a device sends when it registers a pass (Apple's: more fields may come, and are
    ignored)."""

    model_config = ConfigDict(extra="ignore")

    push_token: str = Field(min_length=1, max_length=256)


class ChangedPasses(CamelModel):
    serial_numbers: list[str]
    last_updated: str


class DeviceLogs(CamelInput):
    model_config = ConfigDict(extra="ignore")

    logs: list[str] = Field(max_length=100)


class PassLogo(SnakeModel):
    """What a project's wallet passes show: its own logo, or Tessera's mark."""

    project_id: uuid.UUID
    logo: Literal["project", "tessera"]
